"""Every /api/v1/ route × method × a key holding exactly one scope → the status it must give.

The routes come from the URL configuration (tests/gate/routes.py), so a new route or method fails
``test_every_route_and_method_has_an_expectation`` until EXPECTED says what each scope gets. Each
call is made with a valid request on the ``world`` (tests/gate/conftest.py), inside a savepoint
that is rolled back, so every call sees the same data and a key with the right scope succeeds:
what a wrong scope gets is the gate's refusal, not a validation error.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import memory_body
from tests.gate.routes import api_routes, call_every_route

pytestmark = pytest.mark.django_db

SCOPES = ("read", "write", "propose", "mint")
DENIED = (403, "insufficient_scope")
READ_ONLY = (403, "procedure_read_only")


def only(**allowed: int) -> dict[str, tuple[int, str | None]]:
    """The statuses of the scopes named; every other scope is refused with insufficient_scope."""
    return {s: (allowed[s], None) if s in allowed else DENIED for s in SCOPES}


def every(status: int, code: str | None = None) -> dict[str, tuple[int, str | None]]:
    return {s: (status, code) for s in SCOPES}


P = "api/v1/"
PROC = P + "procedures/<str:name>"
EXPECTED: dict[tuple[str, str], dict[str, tuple[int, str | None]]] = {
    (P + "health", "GET"): every(200),
    (P + "schema", "GET"): every(200),
    # The API reference pages (Swagger UI, ReDoc) are public like the schema they read.
    (P + "docs/", "GET"): every(200),
    (P + "redoc/", "GET"): every(200),
    (P + "principal-tokens", "POST"): only(mint=201),
    (P + "memories", "GET"): only(read=200),
    (P + "memories", "POST"): only(write=201),
    (P + "memories/batch", "POST"): only(write=200),
    (P + "memories/<str:memory_id>", "GET"): only(read=200),
    (P + "memories/<str:memory_id>", "DELETE"): only(write=202),
    (P + "memories/<str:memory_id>/history", "GET"): only(read=200),
    # Routes whose answer is stored content (the popped event, a summary of stored events, the values a
    # correction carries over) need read as well as write: no key holding one scope passes.
    (P + "memories/<str:memory_id>/correct", "POST"): only(),
    (P + "outcomes", "POST"): only(write=201),
    (P + "candidates", "POST"): only(write=202, propose=202),
    (P + "retrieve", "POST"): only(read=200),
    (P + "retrievals/<str:retrieval_id>", "GET"): only(read=200),
    (P + "facts", "GET"): only(read=200),
    (P + "subject", "DELETE"): only(write=202),
    (P + "deletions/<str:deletion_id>", "GET"): only(read=200),
    (P + "export", "GET"): only(read=200),
    (P + "threads", "GET"): only(read=200),
    (P + "threads", "POST"): only(write=201),
    (P + "threads/<str:thread_id>", "GET"): only(read=200),
    (P + "threads/<str:thread_id>/events", "GET"): only(read=200),
    (P + "threads/<str:thread_id>/events", "POST"): only(write=201),
    (P + "threads/<str:thread_id>/events", "DELETE"): only(write=202),
    (P + "threads/<str:thread_id>/events/batch", "POST"): only(write=201),
    (P + "threads/<str:thread_id>/events/pop", "POST"): only(),
    (P + "threads/<str:thread_id>/events/<str:event_id>", "GET"): only(read=200),
    (P + "threads/<str:thread_id>/events/<str:event_id>", "DELETE"): only(write=200),
    (P + "threads/<str:thread_id>/summaries", "GET"): only(read=200),
    (P + "threads/<str:thread_id>/summaries", "POST"): only(write=201),
    (P + "threads/<str:thread_id>/summarize", "POST"): only(),
    (P + "threads/<str:thread_id>/summary", "GET"): only(read=200),
    (P + "workflows/<str:workflow_id>/checkpoint", "GET"): only(read=200),
    (P + "workflows/<str:workflow_id>/checkpoint", "PUT"): only(write=200),
    (P + "workflows/<str:workflow_id>/tool-calls", "POST"): only(write=201),
    (P + "workflows/<str:workflow_id>/tool-calls/<str:key>", "GET"): only(read=200),
    (P + "workflows/<str:workflow_id>/tool-calls/<str:key>", "PATCH"): only(write=200),
    (P + "documents", "GET"): only(read=200),
    (P + "documents", "POST"): only(write=201),
    (P + "documents/batch", "POST"): only(write=200),
    (P + "documents/<int:document_id>", "GET"): only(read=200),
    (P + "documents/<int:document_id>", "DELETE"): only(write=202),
    (P + "procedures/<str:name>/proposals", "GET"): only(read=200),
    (P + "procedures/<str:name>/proposals", "POST"): only(propose=201),
    (P + "procedures/<str:name>/<path:rest>", "GET"): every(404, "not_found"),
}
# Procedures are read-only through the API: every other write method on them is refused for any key.
for _pattern in (P + "procedures", PROC, PROC + "/versions", PROC + "/versions/<int:number>",
                 PROC + "/proposals", PROC + "/proposals/<str:proposal_id>", PROC + "/<path:rest>"):
    for _method in ("POST", "PUT", "PATCH", "DELETE"):
        EXPECTED.setdefault((_pattern, _method), every(*READ_ONLY))
    EXPECTED.setdefault((_pattern, "GET"), only(read=200))


def requests(world: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """A valid request per route and method (the URL's ids come from ``world``)."""
    document = {"access_domain": "handbook", "external_id": "doc-2", "title": "Visa rules", "text": "Visas take weeks."}
    return {
        (P + "principal-tokens", "POST"): {"body": {"subject_id": "usr_owner"}},
        (P + "memories", "POST"): {"body": memory_body()},
        (P + "memories/batch", "POST"): {"body": {"items": [memory_body()]}},
        (P + "memories/<str:memory_id>/correct", "POST"): {"body": {"fact": {"value": "window"}}},
        (P + "outcomes", "POST"): {"body": memory_body(source={"type": "verified_outcome", "event_id": "evt_o"})},
        (P + "candidates", "POST"): {"body": memory_body(source={"type": "model_inferred", "event_id": "evt_c"})},
        (P + "retrieve", "POST"): {"body": {"query": "aisle seat"}},
        (P + "facts", "GET"): {"body": {"namespace": "user/travel_preferences", "field": "seat"}},
        (P + "threads", "POST"): {"body": {"title": "another"}},
        (P + "threads/<str:thread_id>/events", "POST"): {"body": {"kind": "message", "role": "user", "text": "hi"}},
        (P + "threads/<str:thread_id>/events/batch", "POST"): {
            "body": {"events": [{"kind": "message", "role": "user", "text": "hi again"}]}},
        (P + "threads/<str:thread_id>/summaries", "POST"): {"body": {"text": "Said hi", "from_seq": 1, "to_seq": 1}},
        (P + "threads/<str:thread_id>/summarize", "POST"): {"body": {}},
        (P + "workflows/<str:workflow_id>/checkpoint", "PUT"): {"body": {"current_step": "book"},
                                                                "headers": {"If-Match": '"1"'}},
        (P + "workflows/<str:workflow_id>/tool-calls", "POST"): {"body": {"idempotency_key": "call-2", "tool": "pay"}},
        (P + "workflows/<str:workflow_id>/tool-calls/<str:key>", "PATCH"): {
            "body": {"status": "succeeded", "outcome": {"paid": True}}},
        (P + "documents", "POST"): {"body": document},
        (P + "documents/batch", "POST"): {"body": {"documents": [document]}},
        (P + "procedures/<str:name>/proposals", "POST"): {"body": {"body": "Book economy, always."}},
    }


def url_values(world: Any) -> dict[str, Any]:
    return {"memory_id": world.user_record, "retrieval_id": world.retrieval_id, "deletion_id": world.deletion_id,
            "thread_id": world.thread_id, "event_id": world.thread_event_id, "workflow_id": world.workflow_id,
            "key": world.tool_call_key, "document_id": world.document_id, "name": world.procedure, "number": 1,
            "proposal_id": world.proposal_id, "rest": "approve"}


def answer(response: Any) -> tuple[int, str | None]:
    code = None
    if response.get("Content-Type", "").startswith("application/json"):
        body = response.json()
        code = body.get("code") if isinstance(body, dict) else None
    return response.status_code, code


def matches(got: tuple[int, str | None], expected: tuple[int, str | None]) -> bool:
    return got[0] == expected[0] and (expected[1] is None or got[1] == expected[1])


def test_every_route_and_method_has_an_expectation():
    declared = {(r.pattern, m) for r in api_routes() for m in r.methods}

    assert sorted(declared - set(EXPECTED)) == [], "routes without an entry in EXPECTED"
    assert sorted(set(EXPECTED) - declared) == [], "entries in EXPECTED for routes that do not exist"


@pytest.mark.parametrize("scope", SCOPES)
def test_each_scope_gets_exactly_what_the_table_says_on_every_route(world, make_agent, tenant, scope):
    key = make_agent(tenant, "usr_owner", scopes=[scope])
    wrong = []
    for route, method, response in call_every_route(key, requests(world), url_values(world)):
        got, expected = answer(response), EXPECTED[(route.pattern, method)][scope]
        if not matches(got, expected):
            wrong.append(f"{method} {route.pattern}: got {got}, expected {expected}")

    assert wrong == [], "\n".join(wrong)


READ_AND_WRITE = {
    (P + "memories/<str:memory_id>/correct", "POST"): 201,
    (P + "threads/<str:thread_id>/events/pop", "POST"): 200,
    (P + "threads/<str:thread_id>/summarize", "POST"): 201,
}


def test_it_gives_the_routes_that_answer_with_stored_content_to_a_key_with_read_and_write(world, make_agent, tenant):
    key = make_agent(tenant, "usr_owner", scopes=["read", "write"])
    got = {(route.pattern, method): response.status_code
           for route, method, response in call_every_route(key, requests(world), url_values(world))
           if (route.pattern, method) in READ_AND_WRITE}

    assert got == READ_AND_WRITE


def stored_content(world: Any) -> list[str]:
    """Words the world stored that no request of ``requests`` sends."""
    from tests.gate.conftest import ORG_WORDS, USER_WORDS

    return [USER_WORDS, ORG_WORDS, "book me a flight", "Wants a flight", "flights", "Economy class for trips",
            "Travel policy", "Book economy first", "clarity"]


@pytest.mark.parametrize("scope", [s for s in SCOPES if s != "read"])
def test_it_answers_a_key_without_read_with_only_what_it_sent_and_ids(world, make_agent, tenant, scope):
    key = make_agent(tenant, "usr_owner", scopes=[scope])
    leaks = []
    for route, method, response in call_every_route(key, requests(world), url_values(world)):
        text = response.content.decode(errors="replace")
        found = [word for word in stored_content(world) if word in text]
        if found and route.pattern not in (P + "schema", P + "docs/", P + "redoc/"):
            leaks.append(f"{method} {route.pattern} ({response.status_code}): {found}")

    assert leaks == [], "\n".join(leaks)


def test_it_leaves_the_stored_arguments_out_of_a_write_only_keys_tool_call_answers(world, make_agent, tenant):
    key = make_agent(tenant, "usr_owner", scopes=["write"])
    url = f"/api/v1/workflows/{world.workflow_id}/tool-calls"

    done = key.patch(f"{url}/{world.tool_call_key}", {"status": "succeeded", "outcome": {"paid": True}})
    again = key.post(url, {"idempotency_key": world.tool_call_key, "tool": "search", "arguments": {"q": "flights"}})
    full = world.owner.get(f"{url}/{world.tool_call_key}")

    assert done.status_code == 200 and again.status_code == 200
    assert done.json()["outcome"] == {"paid": True} and "arguments" not in done.json() and "tool" not in done.json()
    assert again.json()["arguments"] == {"q": "flights"} and "outcome" not in again.json()
    assert again.json()["status"] == "succeeded"
    assert full.json()["arguments"] == {"q": "flights"} and full.json()["outcome"] == {"paid": True}
