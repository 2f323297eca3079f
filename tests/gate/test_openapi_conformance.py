"""Real answers of real calls are answers the contract documents (tests/api/contract.py says what that means:
status documented, body valid against its closed schema, headers present, error code listed).

Every route of the URL configuration is called the way the scope matrix calls it, on the same
``world``: with a key holding every scope (each operation's happy path), with each single scope, with
a namespace-restricted grant, without or with broken credentials, with unknown ids and with bodies
that are not valid; then a table of the specific refusals each area gives (conflicts,
preconditions, secrets, policy, an unreachable summarizer). Each pass also asserts the statuses it
set out to provoke, so a pass cannot quietly test nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.api.contract import Contract
from tests.conftest import memory_body
from tests.gate.routes import api_routes, call, call_every_route
from tests.gate.test_namespace_grants import outside_requests
from tests.gate.test_scope_matrix import requests, url_values

pytestmark = pytest.mark.django_db

ALL_SCOPES = ["read", "write", "propose", "mint"]


@pytest.fixture(scope="module")
def contract() -> Contract:
    return Contract()


def operations_called(contract: Contract) -> list[tuple[str, str]]:
    return [(r.pattern, m) for r in api_routes() for m in r.methods if contract.operation(r.pattern, m)]


def conform(contract: Contract, calls: list[tuple[Any, str, Any]]) -> tuple[list[str], Counter[int]]:
    """Check every answer that belongs to an operation; count the statuses seen."""
    wrong: list[str] = []
    statuses: Counter[int] = Counter()
    for route, method, response in calls:
        if contract.operation(route.pattern, method) is None:
            continue  # a refusal route or a docs page: not an operation
        statuses[response.status_code] += 1
        wrong += contract.check(route.pattern, method, response)
    return wrong, statuses


def test_every_operation_answers_its_happy_path_as_documented(contract, world, make_agent, tenant):
    agent = make_agent(tenant, "usr_owner", scopes=ALL_SCOPES)
    calls = call_every_route(agent, requests(world), url_values(world))

    wrong, statuses = conform(contract, calls)

    assert wrong == [], "\n".join(wrong)
    succeeded = {(r.pattern, m) for r, m, resp in calls if 200 <= resp.status_code < 300}
    assert set(operations_called(contract)) - succeeded == set(), "operations whose happy path was not reached"


@pytest.mark.parametrize("scope", ALL_SCOPES)
def test_a_key_with_one_scope_gets_documented_answers(contract, world, make_agent, tenant, scope):
    agent = make_agent(tenant, "usr_owner", scopes=[scope])

    wrong, statuses = conform(contract, call_every_route(agent, requests(world), url_values(world)))

    assert wrong == [], "\n".join(wrong)
    assert statuses[403] > 0  # insufficient_scope was provoked and checked


@pytest.mark.parametrize("form", ["key", "token"])
def test_a_restricted_grant_gets_documented_answers(contract, world, make_agent, tenant, form):
    grant = {"namespaces": ["user"]} if form == "key" else {"token_namespaces": ["user"]}
    agent = make_agent(tenant, "usr_owner", scopes=ALL_SCOPES, **grant)
    url = {**url_values(world), "memory_id": world.org_record}

    wrong, statuses = conform(contract, call_every_route(agent, outside_requests(world), url))

    assert wrong == [], "\n".join(wrong)
    assert statuses[403] > 0 and statuses[404] > 0  # namespace_forbidden and another namespace's 404


def test_calls_without_valid_credentials_get_documented_refusals(contract, world, make_agent, tenant, other_tenant):
    owner = make_agent(tenant, "usr_owner", scopes=ALL_SCOPES)
    foreign = make_agent(other_tenant, "usr_owner", scopes=ALL_SCOPES)
    credentials = {
        "none": {},
        "a malformed header": {"HTTP_AUTHORIZATION": "Token abc"},
        "an unknown key": {"HTTP_AUTHORIZATION": "Bearer egk_not_a_key"},
        "no principal token": {"HTTP_AUTHORIZATION": f"Bearer {owner.key}"},
        "a forged principal token": {"HTTP_AUTHORIZATION": f"Bearer {owner.key}",
                                     "HTTP_X_ENGRAM_PRINCIPAL": "ept_forged"},
        "another tenant's token": {"HTTP_AUTHORIZATION": f"Bearer {owner.key}",
                                   "HTTP_X_ENGRAM_PRINCIPAL": foreign.token},
    }
    wrong: list[str] = []
    refused: Counter[int] = Counter()
    for name, auth in credentials.items():
        for route in api_routes():
            for method in route.methods:
                if contract.operation(route.pattern, method) is None:
                    continue
                spec = requests(world).get((route.pattern, method), {})
                response = call(owner.client, method, route.url(url_values(world)), spec.get("body"),
                                spec.get("headers"), auth)
                refused[response.status_code] += response.status_code in (401, 403)
                wrong += [f"[{name}] {p}" for p in contract.check(route.pattern, method, response)]

    assert wrong == [], "\n".join(wrong)
    assert refused[401] > 0 and refused[403] > 0


def test_unknown_ids_get_documented_answers(contract, world, make_agent, tenant):
    agent = make_agent(tenant, "usr_owner", scopes=ALL_SCOPES)
    unknown = {name: (999_999 if isinstance(value, int) else f"{str(value)[:3]}_unknown")
               for name, value in url_values(world).items()}

    wrong, statuses = conform(contract, call_every_route(agent, requests(world), unknown))

    assert wrong == [], "\n".join(wrong)
    assert statuses[404] >= 20


def test_bodies_that_are_not_valid_get_documented_answers(contract, world, make_agent, tenant):
    agent = make_agent(tenant, "usr_owner", scopes=ALL_SCOPES)
    wrong: list[str] = []
    for route in api_routes():
        for method in ("POST", "PUT", "PATCH"):
            if method not in route.methods or contract.operation(route.pattern, method) is None:
                continue
            url = route.url(url_values(world))
            headers = agent._headers(requests(world).get((route.pattern, method), {}).get("headers"))
            for body in (["not", "an", "object"], {"unknown_field": 1}):
                response = call(agent.client, method, url, body, None, headers)
                assert response.status_code == 400, (method, url, body, response.content)
                wrong += contract.check(route.pattern, method, response)
            response = getattr(agent.client, method.lower())(url, "{not json", content_type="application/json",
                                                             **headers)
            assert response.json()["code"] == "malformed_json", (method, url)
            wrong += contract.check(route.pattern, method, response)

    assert wrong == [], "\n".join(wrong)


def test_the_specific_refusals_of_each_area_are_documented(contract, world, make_agent, tenant, settings):
    """Each row provokes one refusal; the answer must be the one asked for and a documented one."""
    owner = make_agent(tenant, "usr_owner", scopes=ALL_SCOPES)
    thread, workflow = world.thread_id, world.workflow_id
    for event_id, value in (("evt_region_eu", "EU"), ("evt_region_us", "US")):  # two org records disagree
        assert owner.post("/api/v1/outcomes", {
            "namespace": ["org", "billing"], "kind": "policy", "fact": {"field": "region", "value": value},
            "source": {"type": "org_record", "event_id": event_id}}).status_code == 201
    owner.post(f"/api/v1/threads/{thread}/events", {"kind": "message", "role": "user", "text": "first"},
               headers={"Idempotency-Key": "turn-1"})
    owner.patch(f"/api/v1/workflows/{workflow}/tool-calls/call-1", {"status": "succeeded", "outcome": {"ok": 1}})
    secret = "My AWS key is AKIAIOSFODNN7EXAMPLE"
    P = "api/v1/"
    rows: list[tuple[str, str, str, Any, dict[str, str], int, str]] = [
        # pattern, method, url, body, headers, status, code
        (P + "memories", "POST", "/api/v1/memories", memory_body(text=secret), {}, 422, "secret_detected"),
        (P + "memories", "POST", "/api/v1/memories", memory_body(namespace=["nowhere"]), {}, 422,
         "class_not_allowed"),
        (P + "memories", "POST", "/api/v1/memories", memory_body(source={"event_id": "evt_user_1"}), {}, 409,
         "idempotency_conflict"),
        (P + "memories", "POST", "/api/v1/memories", memory_body(subject_id="usr_someone_else"), {}, 400,
         "scope_mismatch"),
        (P + "memories", "POST", "/api/v1/memories", memory_body(source={"type": "model_inferred"}), {}, 400,
         "invalid_source_type"),
        (P + "memories/batch", "POST", "/api/v1/memories/batch", {"items": [memory_body()] * 501}, {}, 400,
         "batch_too_large"),
        (P + "retrieve", "POST", "/api/v1/retrieve", {"query": "x", "include": ["nothing"]}, {}, 400,
         "invalid_include"),
        (P + "retrieve", "POST", "/api/v1/retrieve", {"query": "x", "filters": {"fields": 3}}, {}, 400,
         "invalid_filter"),
        (P + "facts", "GET", "/api/v1/facts", {"namespace": "org/billing", "field": "region"}, {}, 409, "conflict"),
        (P + "principal-tokens", "POST", "/api/v1/principal-tokens", {"subject_id": "usr_owner", "ttl": 10**9}, {},
         400, "invalid_ttl"),
        (P + "threads/<str:thread_id>/events", "POST", f"/api/v1/threads/{thread}/events",
         {"kind": "message", "role": "user", "text": "second"}, {"Idempotency-Key": "turn-1"}, 409,
         "idempotency_conflict"),
        (P + "threads/<str:thread_id>/events", "POST", f"/api/v1/threads/{thread}/events",
         {"kind": "message", "role": "user", "text": "hi", "corrects": "tev_nope"}, {}, 400, "unknown_event"),
        (P + "threads/<str:thread_id>/summaries", "POST", f"/api/v1/threads/{thread}/summaries",
         {"text": "Said hi", "from_seq": 1, "to_seq": 99}, {}, 400, "invalid_range"),
        (P + "workflows/<str:workflow_id>/checkpoint", "PUT", f"/api/v1/workflows/{workflow}/checkpoint",
         {"current_step": "pay"}, {}, 428, "precondition_required"),
        (P + "workflows/<str:workflow_id>/checkpoint", "PUT", f"/api/v1/workflows/{workflow}/checkpoint",
         {"current_step": "pay"}, {"If-Match": '"7"'}, 412, "precondition_failed"),
        (P + "workflows/<str:workflow_id>/checkpoint", "PUT", f"/api/v1/workflows/{workflow}/checkpoint",
         {"current_step": "pay"}, {"If-Match": "seven"}, 400, "invalid_precondition"),
        (P + "workflows/<str:workflow_id>/tool-calls", "POST", f"/api/v1/workflows/{workflow}/tool-calls",
         {"idempotency_key": "call-1", "tool": "other"}, {}, 409, "idempotency_conflict"),
        (P + "workflows/<str:workflow_id>/tool-calls/<str:key>", "PATCH",
         f"/api/v1/workflows/{workflow}/tool-calls/call-1", {"status": "failed", "outcome": None}, {}, 409,
         "outcome_already_recorded"),
        (P + "documents", "POST", "/api/v1/documents",
         {"access_domain": "handbook", "external_id": "doc-9", "title": "Keys", "text": f"Note.\n\n{secret}"}, {},
         422, "secret_detected"),
        (P + "documents", "POST", "/api/v1/documents",
         {"access_domain": "nowhere", "external_id": "doc-9", "text": "Hello"}, {}, 404, "not_found"),
        (P + "procedures/<str:name>/proposals", "POST", "/api/v1/procedures/booking/proposals",
         {"body": "Book economy.", "base_version": 9}, {}, 404, "base_version_not_found"),
        (P + "procedures/<str:name>/proposals", "POST", "/api/v1/procedures/booking/proposals",
         {"body": "   "}, {}, 400, "empty_body"),
    ]
    wrong: list[str] = []
    for pattern, method, url, body, headers, status, code in rows:
        response = call(owner.client, method, url, body, headers, owner._headers(None))
        got = (response.status_code, response.json().get("code"))
        if got != (status, code):
            wrong.append(f"{method} {url}: got {got}, expected {(status, code)}")
        wrong += contract.check(pattern, method, response)
    settings.ENGRAM_SUMMARIZER_URL = "http://127.0.0.1:9/v1"  # the discard port: connection refused
    response = owner.post(f"/api/v1/threads/{thread}/summarize", {})
    assert response.status_code == 503
    wrong += contract.check(P + "threads/<str:thread_id>/summarize", "POST", response)

    assert wrong == [], "\n".join(wrong)


def test_the_health_check_answers_as_documented(contract, client):
    response = client.get("/api/v1/health")

    assert response.status_code == 200
    assert contract.check("api/v1/health", "GET", response) == []
