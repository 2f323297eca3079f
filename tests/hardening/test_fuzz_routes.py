"""Every route of /api/v1, every method it answers: whatever a client sends — arbitrary JSON bodies, NUL and
lone surrogates in values, keys, path ids and query strings, integers beyond 64 bits, deep nesting — the
answer is a {"code", "detail"} error or a success, never a 5xx.

The routes are read from the URL configuration, so an endpoint added later is fuzzed without anyone
remembering to add it here. ENGRAM_FUZZ_EXAMPLES sets the examples per route and method.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "15"))
METHODS = ("get", "post", "put", "patch", "delete")
SKIPPED = {"api/v1/schema"}  # static document, covered by the schemathesis test


def api_routes() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern

    for route, pattern in walk(get_resolver().url_patterns, ""):
        if route.startswith("api/v1/") and route not in SKIPPED:
            yield route, pattern


def route_methods() -> list[tuple[str, str]]:
    out = []
    for route, pattern in api_routes():
        view_class = getattr(pattern.callback, "view_class", None)
        out += [(route, m) for m in METHODS if view_class is not None and hasattr(view_class, m)]
    return out


# --- strategies ------------------------------------------------------------------------------------
HOSTILE = ["\x00", "\ud800", "a\udfffb", "\x00\ud800", "\u2028", "\ufeff", "𝕏", "'; DROP TABLE x; --"]
texts = st.one_of(st.text(max_size=16), st.sampled_from(HOSTILE),
                  st.builds(lambda a, b, c: a + b + c, st.text(max_size=6), st.sampled_from(HOSTILE),
                            st.text(max_size=6)))
integers = st.one_of(st.integers(min_value=-(10**3), max_value=10**3),
                     st.sampled_from([2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30]), st.integers())
scalars = st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(texts, children, max_size=4), max_leaves=12)
FIELD_NAMES = ["query", "namespace", "namespaces", "kind", "type", "fact", "text", "source", "items", "documents",
               "title", "metadata", "data", "idempotency_key", "tool", "arguments", "status", "outcome", "subject_id",
               "filters", "field", "value", "external_id", "access_domain", "ttl", "from_seq", "to_seq", "artifacts",
               "completed_steps", "embed", "limit", "offset", "evidence", "reference", "role", "include"]
shaped = st.dictionaries(st.sampled_from(FIELD_NAMES) | texts, json_values, max_size=6)


def _replace_leaf(body: Any, path: list[Any], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    copy = dict(body) if isinstance(body, dict) else list(body)
    copy[head] = _replace_leaf(copy[head], rest, value)
    return copy


def _leaf_paths(body: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    prefix = prefix or []
    if isinstance(body, dict):
        return [p for k, v in body.items() for p in _leaf_paths(v, [*prefix, k])] or [prefix]
    if isinstance(body, list):
        return [p for i, v in enumerate(body) for p in _leaf_paths(v, [*prefix, i])] or [prefix]
    return [prefix]


# Valid bodies, mutated one leaf at a time: the hostile value travels past the serializer into the services.
VALID = [
    memory_body(),
    {"items": [memory_body()]},
    {"query": "aisle seat", "filters": {"fields": ["seat_preference"]}},
    {"title": "trip", "metadata": {"a": 1}},
    {"kind": "message", "role": "user", "text": "hello", "data": {"k": "v"}},
    {"current_step": "s1", "artifacts": {"a": [1]}, "completed_steps": ["s0"]},
    {"idempotency_key": "k1", "tool": "search", "arguments": {"q": "x"}},
    {"status": "succeeded", "outcome": {"ok": True}},
    {"access_domain": "handbook", "external_id": "d1", "title": "T", "text": "Body text.", "metadata": {"a": "b"}},
    {"documents": [{"access_domain": "handbook", "external_id": "d2", "title": "T", "text": "x"}]},
    {"subject_id": "usr_fuzz", "ttl": 60},
]
mutated = st.sampled_from(VALID).flatmap(
    lambda body: st.tuples(st.sampled_from(_leaf_paths(body)), json_values).map(
        lambda pv: _replace_leaf(body, pv[0], pv[1])))
bodies = st.one_of(json_values, shaped, mutated)
deep = st.integers(min_value=60, max_value=3000).map(lambda n: b'{"a": ' + b"[" * n + b"]" * n + b"}")
raw_bodies = st.one_of(bodies.map(lambda b: json.dumps(b, ensure_ascii=True).encode()), deep,
                       st.binary(max_size=40))
query_params = st.dictionaries(st.sampled_from(["limit", "offset", "after", "namespace", "field", "kind", "status",
                                                "access_domain"]) | texts,
                               texts | integers.map(str), max_size=4)


def _fill(route: str, pattern: URLPattern, values: dict[str, Any]) -> str:
    path = route
    for name, converter in pattern.pattern.converters.items():  # type: ignore[attr-defined]
        kind = "int" if isinstance(converter, IntConverter) else ("path" if "path" in type(converter).__name__.lower()
                                                                  else "str")
        value = values[name]
        segment = str(abs(value)) if kind == "int" else (quote(value, safe="/" if kind == "path" else "",
                                                               errors="surrogatepass") or "x")
        path = path.replace(f"<{kind}:{name}>", segment)
    return "/" + path


def _query(params: dict[str, str]) -> str:
    return "&".join(f"{quote(k, errors='surrogatepass')}={quote(v, errors='surrogatepass')}" for k, v in params.items())


path_values = st.one_of(st.sampled_from(["x", "mem_1", "thr_1", "del_1", "wf_1", "travel"]), texts, integers)


@pytest.fixture
def fuzz_agent(make_agent, tenant):
    from memory.knowledge.services import access_domain_create

    access_domain_create(tenant=tenant, name="handbook", subject_external_ids=["usr_owner"])
    return make_agent(tenant, "usr_owner", scopes=["read", "write", "propose", "mint"])


@pytest.mark.parametrize("route, method", route_methods())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_no_route_answers_5xx_to_anything(fuzz_agent, route, method, data):
    pattern = dict(api_routes())[route]
    names = list(pattern.pattern.converters)  # type: ignore[attr-defined]
    values = {n: data.draw(path_values.map(lambda v: v if isinstance(v, str) else str(v)), label=n) for n in names}
    for name, converter in pattern.pattern.converters.items():  # type: ignore[attr-defined]
        if isinstance(converter, IntConverter):
            values[name] = data.draw(integers, label=name)
    path = _fill(route, pattern, values)
    params = data.draw(query_params, label="query")
    body = data.draw(raw_bodies, label="body") if method in ("post", "put", "patch") else b""
    url = path + ("?" + _query(params) if params else "")

    response = fuzz_agent.client.generic(method.upper(), url, body, content_type="application/json",
                                         **fuzz_agent._headers(None))

    assert response.status_code < 500, (method, url, body[:300], response.content[:500])
    if response.status_code >= 400 and response.status_code != 405:
        payload = response.json()
        assert isinstance(payload.get("code"), str) and isinstance(payload.get("detail"), str), payload
