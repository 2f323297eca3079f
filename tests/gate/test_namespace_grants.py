"""A namespace grant (key ∩ token) filters every surface: every /api/v1/ route, for a principal
restricted to ``user``, aimed at what lies outside its grant.

The same ``world`` as the scope matrix. The restricted principal holds every scope, so what refuses
it here is the grant and nothing else. Two invariants over every route and method: the answer is
the one in OUTSIDE, and no answer quotes the words of the ``org`` record or candidate. Then the
converse: a grant that reaches everything the world holds (user, threads, knowledge) gets what an
unrestricted key gets, except the two things only an unrestricted principal may do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.errors import InvalidInput
from memory.models import MemoryClass
from tests.conftest import memory_body
from tests.gate.conftest import ORG_WORDS, USER_WORDS, write
from tests.gate.routes import call_every_route
from tests.gate.test_scope_matrix import EXPECTED, READ_AND_WRITE, P, answer, matches, requests, url_values

pytestmark = pytest.mark.django_db

ALL_SCOPES = ["read", "write", "propose", "mint"]
FORBIDDEN = (403, "namespace_forbidden")
NOT_FOUND = (404, "not_found")
THREAD_ROUTES = ("threads", "workflows")


def outside_requests(world: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """The scope matrix's requests, aimed at the org namespace wherever a request names one."""
    org = {"namespace": ["org"], "kind": "fact", "fact": {"field": "budget", "value": "eleven"}}
    return {**requests(world),
            (P + "principal-tokens", "POST"): {"body": {"subject_id": "usr_owner", "namespaces": [["org"]]}},
            (P + "memories", "POST"): {"body": memory_body(**org)},
            (P + "memories/batch", "POST"): {"body": {"items": [memory_body(**org)]}},
            (P + "outcomes", "POST"): {"body": memory_body(**org, source={"type": "verified_outcome",
                                                                          "event_id": "evt_o"})},
            (P + "candidates", "POST"): {"body": memory_body(**org, source={"type": "model_inferred",
                                                                            "event_id": "evt_c"})},
            (P + "retrieve", "POST"): {"body": {"query": f"budget {ORG_WORDS}"}},
            (P + "facts", "GET"): {"body": {"namespace": "org", "field": "budget"}}}


def outside_expected(pattern: str, method: str, form: str) -> tuple[int, str | None]:
    """What the restricted principal gets, aimed outside its grant."""
    if pattern.startswith(tuple(P + r for r in THREAD_ROUTES)):
        return FORBIDDEN  # thread state needs a "threads" grant
    special: dict[tuple[str, str], tuple[int, str | None]] = {
        # Minting is the key's act (no principal): a restricted key never mints wider than itself,
        # an unrestricted key mints what it is asked for whatever token comes along.
        (P + "principal-tokens", "POST"): FORBIDDEN if form == "key" else (201, None),
        (P + "memories", "POST"): FORBIDDEN,
        (P + "outcomes", "POST"): FORBIDDEN,
        (P + "candidates", "POST"): FORBIDDEN,
        (P + "memories/batch", "POST"): (200, None),  # the item's error is in the body (checked below)
        (P + "memories/<str:memory_id>", "GET"): NOT_FOUND,
        (P + "memories/<str:memory_id>", "DELETE"): NOT_FOUND,
        (P + "memories/<str:memory_id>/history", "GET"): NOT_FOUND,
        (P + "memories/<str:memory_id>/correct", "POST"): NOT_FOUND,
        (P + "facts", "GET"): NOT_FOUND,
        (P + "subject", "DELETE"): FORBIDDEN,  # a whole-subject erasure needs an unrestricted principal
        (P + "deletions/<str:deletion_id>", "GET"): NOT_FOUND,  # the job deleted an org record
        # Knowledge: no "knowledge" grant, so no domain is readable or writable.
        (P + "documents", "POST"): NOT_FOUND,
        (P + "documents/<int:document_id>", "GET"): NOT_FOUND,
        (P + "documents/<int:document_id>", "DELETE"): NOT_FOUND,
    }
    if (pattern, method) in special:
        return special[(pattern, method)]
    return best(pattern, method)


def best(pattern: str, method: str) -> tuple[int, str | None]:
    """What a key holding every scope gets: the answer of a scope that is not refused (or, for a route that
    needs read and write together, what that pair gets)."""
    if (pattern, method) in READ_AND_WRITE:
        return READ_AND_WRITE[(pattern, method)], None
    for got in EXPECTED[(pattern, method)].values():
        if got != (403, "insufficient_scope"):
            return got
    raise AssertionError("no scope succeeds")


def restricted(make_agent: Any, tenant: Any, form: str, grants: list[str]) -> Any:
    if form == "key":
        return make_agent(tenant, "usr_owner", scopes=ALL_SCOPES, namespaces=grants)
    return make_agent(tenant, "usr_owner", scopes=ALL_SCOPES, token_namespaces=grants)


@pytest.mark.parametrize("form", ["key", "token"])
def test_a_user_grant_reaches_nothing_outside_user_on_any_route(world, make_agent, tenant, form):
    agent = restricted(make_agent, tenant, form, ["user"])
    url = {**url_values(world), "memory_id": world.org_record}
    wrong, leaks = [], []
    for route, method, response in call_every_route(agent, outside_requests(world), url):
        expected = outside_expected(route.pattern, method, form)
        if not matches(answer(response), expected):
            wrong.append(f"{method} {route.pattern}: got {answer(response)}, expected {expected}")
        if ORG_WORDS in response.content.decode(errors="replace"):
            leaks.append(f"{method} {route.pattern}")
        if (route.pattern, method) == (P + "memories/batch", "POST"):
            assert response.json()["results"][0]["http_status"] == 403

    assert wrong == [], "\n".join(wrong)
    assert leaks == [], "answers quoting the org record: " + ", ".join(leaks)


def test_every_export_section_and_the_log_hold_only_the_grant(world, make_agent, tenant):
    agent = restricted(make_agent, tenant, "key", ["user"])

    body = agent.get("/api/v1/export").json()
    log = agent.get(f"/api/v1/retrievals/{world.retrieval_id}").json()

    assert [name for name, rows in body.items() if ORG_WORDS in json.dumps(rows)] == []
    for section in ("records", "candidates", "events"):
        assert USER_WORDS in json.dumps(body[section]), section
        assert all("org" not in json.dumps(row.get("namespace", "")) for row in body[section])
    assert all(body[s] == [] for s in ("threads", "thread_events", "summaries", "checkpoints", "tool_calls"))
    assert body["retrieval_logs"][0]["query"] == ""  # the writer's words: its grant was wider
    assert log["query"] == "" and "grant" not in log["request"] and log["candidates"]
    assert all(c.get("namespace") == ["user", "travel_preferences"] for c in log["candidates"])


def test_a_grant_that_reaches_the_whole_world_refuses_nothing_inside_it(world, make_agent, tenant):
    agent = restricted(make_agent, tenant, "token", ["user", "threads", "knowledge"])
    refused_inside = {(P + "subject", "DELETE"): FORBIDDEN,  # only an unrestricted principal erases a subject
                      (P + "deletions/<str:deletion_id>", "GET"): NOT_FOUND}  # that job deleted an org record
    wrong = []
    for route, method, response in call_every_route(agent, requests(world), url_values(world)):
        expected = refused_inside.get((route.pattern, method)) or best(route.pattern, method)
        if not matches(answer(response), expected):
            wrong.append(f"{method} {route.pattern}: got {answer(response)}, expected {expected}")

    assert wrong == [], "\n".join(wrong)


# --- prefix tricks ---------------------------------------------------------------------------------


def test_a_user_grant_does_not_reach_user2(world, make_agent, tenant):
    MemoryClass.objects.create(tenant=tenant, name="user2", namespace_prefix="user2",
                               allowed_readers=["owner", "agent"], model_permission="write")
    other = write(world.owner, ["user2"], "nick", "zquser2only", "Nickname zquser2only", "evt_u2")
    agent = restricted(make_agent, tenant, "key", ["user"])

    assert agent.get(f"/api/v1/memories/{other}").status_code == 404
    assert "zquser2only" not in agent.get("/api/v1/memories").content.decode()
    assert agent.get("/api/v1/facts", {"namespace": "user2", "field": "nick"}).status_code == 404
    assert agent.post("/api/v1/memories", memory_body(namespace=["user2"])).json()["code"] == "namespace_forbidden"
    assert "zquser2only" not in agent.get("/api/v1/export").content.decode()
    retrieved = agent.post("/api/v1/retrieve", {"query": "nickname", "namespaces": [["user2"]]}).json()
    assert retrieved["packets"] == [] and retrieved["dropped"] == {"out_of_scope": 1}


def test_a_narrower_token_grant_narrows_the_key(world, make_agent, tenant):
    other = write(world.owner, ["user", "home"], "city", "Lisbon", "Lives in Lisbon", "evt_home")
    agent = make_agent(tenant, "usr_owner", namespaces=["user"], token_namespaces=["user/travel_preferences"])

    assert agent.get(f"/api/v1/memories/{world.user_record}").status_code == 200
    assert agent.get(f"/api/v1/memories/{other}").status_code == 404
    assert agent.post("/api/v1/memories", memory_body(namespace=["user", "home"])).status_code == 403


@pytest.mark.parametrize("bad", ["user/", "/user", "User", "USER", "user//x", "user\n", " user", "user "])
def test_trailing_slashes_case_and_whitespace_are_refused_in_grants_and_filters(world, tenant, bad):
    from memory.identity.services import agent_key_create, principal_token_mint

    with pytest.raises(InvalidInput):
        agent_key_create(tenant=tenant, name="odd", permissions=["read"], namespaces=[bad])
    with pytest.raises(InvalidInput):
        principal_token_mint(tenant=tenant, subject_external_id="usr_owner", namespaces=[bad])
    response = world.owner.get("/api/v1/memories", {"namespace": bad})
    assert response.status_code == 400, bad
    assert world.owner.get("/api/v1/facts", {"namespace": bad, "field": "seat"}).status_code == 400


def test_a_trailing_slash_on_a_route_is_no_other_route(world):
    for path in ("/api/v1/memories/", f"/api/v1/memories/{world.user_record}/", "/api/v1/export/"):
        response = world.owner.get(path)
        assert response.status_code == 404 and response.json()["code"] == "not_found", path
