"""The published contract (GET /api/v1/schema) as the tests read it: the operation of a route and method,
and whether a real answer is one the operation documents.

An answer conforms when its status is documented for the operation, its body validates against that
status's schema (OpenAPI 3.0's JSON Schema: ``nullable``, formats such as ``date-time`` checked), every
documented response header is present, and an error's ``code`` is one the operation lists for that
status. Objects are closed for the check (``additionalProperties: false`` wherever the schema lists
properties and says nothing else): a key the server sends but the contract does not name is a failure,
so the contract cannot fall behind the payloads.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from django.test import Client
from openapi_schema_validator import OAS30Validator

from api.openapi import documented_codes

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


@cache
def served_schema() -> dict[str, Any]:
    response = Client().get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200, response.content[:500]
    return response.json()


def openapi_path(pattern: str) -> str:
    """api/v1/memories/<str:memory_id> -> /api/v1/memories/{memory_id}"""
    return "/" + _CONVERTER.sub(r"{\1}", pattern)


def operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(path, METHOD) -> operation object."""
    return {(path, method.upper()): op for path, item in schema["paths"].items()
            for method, op in item.items() if method in METHODS}


def _inline(schema: dict[str, Any], node: Any, seen: tuple[str, ...] = ()) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            assert name not in seen, f"recursive component {name}"
            return _inline(schema, schema["components"]["schemas"][name], (*seen, name))
        # A discriminator's mapping names components by reference; the oneOf it sits beside decides alone
        # (each packet's `source` is an enum of one value).
        return {key: _inline(schema, value, seen) for key, value in node.items() if key != "discriminator"}
    if isinstance(node, list):
        return [_inline(schema, value, seen) for value in node]
    return node


def _closed(node: Any) -> Any:
    if isinstance(node, dict):
        out = {key: _closed(value) for key, value in node.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_closed(value) for value in node]
    return node


def validator(schema: dict[str, Any], node: dict[str, Any]) -> OAS30Validator:
    return OAS30Validator(_closed(_inline(schema, node)), format_checker=OAS30Validator.FORMAT_CHECKER)


def problems_of(schema: dict[str, Any], node: dict[str, Any], value: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
            for e in validator(schema, node).iter_errors(value)]


class Contract:
    def __init__(self, schema: dict[str, Any] | None = None) -> None:
        self.schema = schema or served_schema()
        self.operations = operations(self.schema)

    def operation(self, pattern: str, method: str) -> dict[str, Any] | None:
        return self.operations.get((openapi_path(pattern), method.upper()))

    def check(self, pattern: str, method: str, response: Any) -> list[str]:
        """What is wrong with ``response`` (a Django test response) as an answer of the operation."""
        where = f"{method} {openapi_path(pattern)} -> {response.status_code}"
        op = self.operation(pattern, method)
        if op is None:
            return [f"{where}: not an operation of the schema"]
        documented = op["responses"].get(str(response.status_code))
        if documented is None:
            return [f"{where}: status not documented ({', '.join(sorted(op['responses']))})"]
        found = [f"{where}: no {name} header" for name in documented.get("headers", {})
                 if not response.has_header(name)]
        media = documented.get("content", {}).get("application/json")
        if media is None:
            return found
        if not response.get("Content-Type", "").startswith("application/json"):
            return [*found, f"{where}: Content-Type {response.get('Content-Type')}"]
        body = json.loads(response.content)
        found += [f"{where}: {p}" for p in problems_of(self.schema, media["schema"], body)]
        if response.status_code >= 400:
            code = body.get("code") if isinstance(body, dict) else None
            if code not in documented_codes(documented):
                found.append(f"{where}: code {code!r} not documented for this status "
                             f"({', '.join(sorted(documented_codes(documented)))})")
        return found
