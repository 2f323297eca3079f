"""The published contract is complete: GET /api/v1/schema is valid OpenAPI 3, generated without a warning,
and it documents every route and method of the URL configuration (except the refusal routes and the
docs pages themselves) with its request body, a 2xx response schema, its credentials and the error
responses every caller can meet. Whether real answers match it: tests/gate/test_openapi_conformance.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.http import JsonResponse
from openapi_spec_validator import validate

from api.openapi import AGENT, ERROR_CODES, documented_codes
from api.views.procedures import _ReadOnly
from tests.api.contract import Contract, openapi_path, operations, problems_of, served_schema
from tests.gate.routes import METHODS, _walk

WRITES = ("POST", "PUT", "PATCH")
# Routes that are not operations: the refusals (a write on a procedure, or anything below one) and the
# pages that read the schema.
NOT_OPERATIONS = {"api/v1/procedures/<str:name>/<path:rest>", "api/v1/schema", "api/v1/docs/", "api/v1/redoc/"}
# Writes that take no body, with the reason.
BODILESS: dict[tuple[str, str], str] = {}


def routed() -> set[tuple[str, str]]:
    """Every (OpenAPI path, METHOD) the URL configuration serves under /api/v1/ that is an operation."""
    from django.urls import get_resolver

    found = set()
    for pattern, p in _walk(get_resolver().url_patterns, ""):
        view = getattr(p.callback, "view_class", None) or getattr(p.callback, "cls", None)
        if not pattern.startswith("api/v1/") or pattern in NOT_OPERATIONS or view is None:
            continue
        for method in METHODS:
            handler = getattr(view, method, None)
            if handler is not None and handler is not _ReadOnly.refuse:
                found.add((openapi_path(pattern), method.upper()))
    return found


@pytest.fixture(scope="module")
def schema() -> dict:
    return served_schema()


def test_the_served_schema_is_valid_openapi_3(schema):
    validate(schema)

    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Engram API" and schema["info"]["description"]


def test_the_schema_is_generated_without_a_warning(tmp_path: Path):
    """`manage.py spectacular --validate --fail-on-warn` exits with an error on any warning."""
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))

    assert (tmp_path / "schema.yaml").read_text().startswith("openapi:")


def test_every_route_and_method_is_an_operation_and_nothing_else_is(schema):
    documented = set(operations(schema))

    assert sorted(routed() - documented) == [], "routed but not documented"
    assert sorted(documented - routed()) == [], "documented but not routed"


def test_refusal_routes_are_not_operations(schema):
    paths = schema["paths"]

    assert "/api/v1/procedures/{name}/{rest}" not in paths
    assert set(paths["/api/v1/procedures"]) == {"get"}
    assert set(paths["/api/v1/procedures/{name}/proposals"]) == {"get", "post"}
    assert not {"/api/v1/schema", "/api/v1/docs/", "/api/v1/redoc/"} & set(paths)


def test_every_write_has_a_json_request_body(schema):
    missing = [f"{m} {p}" for (p, m), op in operations(schema).items()
               if m in WRITES and (p, m) not in BODILESS
               and "schema" not in op.get("requestBody", {}).get("content", {}).get("application/json", {})]

    assert missing == []


def test_every_operation_has_a_2xx_response_schema_an_id_a_summary_tags_and_described_parameters(schema):
    tags = {t["name"] for t in schema["tags"]}
    wrong = []
    for (path, method), op in operations(schema).items():
        ok = [s for s, r in op["responses"].items() if s.startswith("2") and "application/json" in r.get("content", {})]
        if not ok:
            wrong.append(f"{method} {path}: no 2xx response schema")
        if not op.get("operationId") or not op.get("summary"):
            wrong.append(f"{method} {path}: no operationId or summary")
        if not op.get("tags") or not set(op["tags"]) <= tags:
            wrong.append(f"{method} {path}: tags {op.get('tags')}")
        wrong += [f"{method} {path}: path parameter {p['name']} undescribed" for p in op.get("parameters", [])
                  if p["in"] == "path" and not p.get("description")]

    assert wrong == []
    assert len({op["operationId"] for op in operations(schema).values()}) == len(operations(schema))


def test_credentials_are_documented_per_operation(schema):
    schemes = schema["components"]["securitySchemes"]
    ops = operations(schema)

    assert schemes["agentKey"] == {**schemes["agentKey"], "type": "http", "scheme": "bearer"}
    assert schemes["principalToken"] == {**schemes["principalToken"], "type": "apiKey", "in": "header",
                                         "name": "X-Engram-Principal"}
    assert "security" not in ops[("/api/v1/health", "GET")]
    assert ops[("/api/v1/principal-tokens", "POST")]["security"] == [{"agentKey": []}]
    acting = [k for k in ops if k not in {("/api/v1/health", "GET"), ("/api/v1/principal-tokens", "POST")}]
    assert all(ops[k]["security"] == [{"agentKey": [], "principalToken": []}] for k in acting)


def test_every_operation_documents_the_errors_any_caller_can_meet(schema):
    """Credentials (401/403), the rate limit (429) and the database's absence (503) on every authenticated
    operation, 400 on every body or query, 404 on every
    operation that reads an object named in its path; every error lists its codes with their status."""
    wrong = []
    for (path, method), op in operations(schema).items():
        responses = op["responses"]
        codes = {status: documented_codes(r) for status, r in responses.items()
                 if status >= "400" and (path, method) != ("/api/v1/health", "GET")}  # its 503 is a health body
        for status, names in codes.items():
            if not names or any(ERROR_CODES[c][0] != int(status) for c in names):
                wrong.append(f"{method} {path}: {status} lists {names}")
        if "security" in op:
            needed = set(AGENT) - ({"principal_required"} if len(op["security"][0]) == 1 else set())
            listed = set().union(*(codes.get(status, set()) for status in ("401", "403", "429", "503")))
            if needed - listed:
                wrong.append(f"{method} {path}: missing {sorted(needed - listed)}")
        takes_input = "requestBody" in op or any(p["in"] == "query" for p in op.get("parameters", []))
        if takes_input and "invalid" not in codes.get("400", set()):
            wrong.append(f"{method} {path}: no 400 invalid")
        if "requestBody" in op and not {"malformed_json", "payload_too_large"} <= codes.get("400", set()):
            wrong.append(f"{method} {path}: no 400 for a body that is not JSON or too large")
        names_an_object = re.search(r"\{(?!workflow_id\})\w+\}$", path) or path.endswith("/history")
        if method in ("GET", "DELETE", "PATCH") and names_an_object and "not_found" not in codes.get("404", set()):
            wrong.append(f"{method} {path}: no 404 not_found")

    assert wrong == [], "\n".join(wrong)


def test_headers_are_documented_where_they_are_read_or_sent(schema):
    ops = operations(schema)

    def header_names(op):
        return {p["name"] for p in op.get("parameters", []) if p["in"] == "header"}

    assert "Idempotency-Key" in header_names(ops[("/api/v1/threads/{thread_id}/events", "POST")])
    put = ops[("/api/v1/workflows/{workflow_id}/checkpoint", "PUT")]
    assert {"If-Match", "If-None-Match"} <= header_names(put)
    assert "ETag" in put["responses"]["200"]["headers"] and "ETag" in put["responses"]["201"]["headers"]
    assert "ETag" in ops[("/api/v1/workflows/{workflow_id}/checkpoint", "GET")]["responses"]["200"]["headers"]


MAIN_OPERATIONS = [("/api/v1/memories", "POST"), ("/api/v1/retrieve", "POST"), ("/api/v1/facts", "GET"),
                   ("/api/v1/memories/batch", "POST"), ("/api/v1/threads/{thread_id}/events", "POST"),
                   ("/api/v1/workflows/{workflow_id}/checkpoint", "PUT")]


def test_the_main_operations_have_examples_and_every_example_matches_its_schema(schema):
    wrong = []
    with_examples = set()
    for (path, method), op in operations(schema).items():
        media = [("request", op.get("requestBody", {}).get("content", {}).get("application/json"))]
        media += [(status, r.get("content", {}).get("application/json")) for status, r in op["responses"].items()]
        for where, content in media:
            for name, example in ((content or {}).get("examples") or {}).items():
                if where == "request" or where < "400":
                    with_examples.add((path, method))
                wrong += [f"{method} {path} {where} example {name}: {p}"
                          for p in problems_of(schema, content["schema"], example["value"])]

    assert wrong == [], "\n".join(wrong)
    assert set(MAIN_OPERATIONS) - with_examples == set()


def test_the_conformance_check_can_fail(schema):
    """An undocumented key, a wrong type, an undocumented status or error code are each reported."""
    contract = Contract(schema)
    ok = {"status": "ok", "database": "ok", "worker": "down", "embeddings_pending": 0}

    assert contract.check("api/v1/health", "GET", JsonResponse(ok)) == []
    assert contract.check("api/v1/health", "GET", JsonResponse({**ok, "extra": 1}))
    assert contract.check("api/v1/health", "GET", JsonResponse({**ok, "embeddings_pending": "0"}))
    assert contract.check("api/v1/health", "GET", JsonResponse(ok, status=418))
    refusal = {"code": "made_up", "detail": "No."}
    assert contract.check("api/v1/memories", "GET", JsonResponse(refusal, status=403))
    assert contract.check("api/v1/memories", "GET", JsonResponse({**refusal, "code": "insufficient_scope"},
                                                                 status=403)) == []


def test_the_docs_pages_are_public_and_load_nothing_from_elsewhere(client):
    for url in ("/api/v1/docs/", "/api/v1/redoc/"):
        response = client.get(url)
        page = response.content.decode()

        assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert "/api/v1/schema" in page
        assert re.findall(r"""(?:src|href)=["']?(https?:)?//""", page) == [], url
        assert "googleapis" not in page and "cdn." not in page
