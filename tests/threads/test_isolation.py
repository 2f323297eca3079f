"""Every thread-state endpoint: 401 without credentials, 404 (never a leak) for another subject or tenant."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.threads.models import Checkpoint, Summary, ThreadEvent, ToolCall
from tests.threads.conftest import append, new_thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def owned(agent):
    """One of everything, owned by the agent's subject (usr_owner in tenant acme)."""
    thread_id = new_thread(agent)
    event_id = append(agent, thread_id, "Owner's private words about Lisbon.").json()["event_id"]
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()["summary_id"]
    agent.put("/api/v1/workflows/wf-1/checkpoint", {"current_step": "owner-step"}, headers={"If-None-Match": "*"})
    agent.post("/api/v1/workflows/wf-1/tool-calls", {"idempotency_key": "k1", "tool": "pay", "arguments": {"a": 1}})
    return {"thread": thread_id, "event": event_id, "summary": summary_id}


def endpoints(o):
    t, e = o["thread"], o["event"]
    return [
        ("get", f"/api/v1/threads/{t}", None, {}),
        ("get", f"/api/v1/threads/{t}/events", None, {}),
        ("post", f"/api/v1/threads/{t}/events", {"kind": "message", "text": "intruder"}, {}),
        ("get", f"/api/v1/threads/{t}/events/{e}", None, {}),
        ("delete", f"/api/v1/threads/{t}/events/{e}", None, {}),
        ("get", f"/api/v1/threads/{t}/summaries", None, {}),
        ("post", f"/api/v1/threads/{t}/summaries", {"text": "x", "from_seq": 1, "to_seq": 1}, {}),
        ("post", f"/api/v1/threads/{t}/summarize", {}, {}),
        ("get", f"/api/v1/threads/{t}/summary", None, {}),
        ("get", "/api/v1/workflows/wf-1/checkpoint", None, {}),
        ("get", "/api/v1/workflows/wf-1/tool-calls/k1", None, {}),
        ("patch", "/api/v1/workflows/wf-1/tool-calls/k1", {"status": "failed", "outcome": {}}, {}),
    ]


OWN_SCOPE_ENDPOINTS = [  # per-subject names: these act on the caller's own subject, never the owner's
    ("put", "/api/v1/workflows/wf-1/checkpoint", {"current_step": "x"}, {"If-Match": '"1"'}),
    ("post", "/api/v1/workflows/wf-1/tool-calls", {"idempotency_key": "k1", "tool": "pay", "arguments": {"a": 1}}, {}),
    ("post", "/api/v1/threads", {"title": "x"}, {}),
    ("get", "/api/v1/threads", None, {}),
]


def call(client, method, url, body, headers):
    if method in ("get", "delete"):
        return getattr(client, method)(url, headers=headers)
    return getattr(client, method)(url, body, headers=headers)


def assert_untouched(o):
    assert ThreadEvent.objects.filter(thread_id=o["thread"]).count() == 1
    assert ThreadEvent.objects.get(pk=o["event"]).status == "recorded"
    assert Summary.objects.filter(thread_id=o["thread"]).count() == 1
    assert Summary.objects.get(pk=o["summary"]).status == "fresh"
    assert Checkpoint.objects.get(subject__external_id="usr_owner", tenant__slug="acme").current_step == "owner-step"
    assert ToolCall.objects.get(subject__external_id="usr_owner", tenant__slug="acme").status == "pending"


@pytest.mark.parametrize("who", ["outsider", "foreign_agent"])
def test_another_subject_or_tenant_gets_404_everywhere_and_changes_nothing(request, owned, who):
    intruder = request.getfixturevalue(who)

    for method, url, body, headers in endpoints(owned):
        response = call(intruder, method, url, body, headers)
        assert response.status_code == 404, (method, url, response.status_code)
        assert response.json()["code"] in ("not_found",), (method, url)
        assert "Lisbon" not in response.content.decode()
    assert_untouched(owned)


@pytest.mark.parametrize("who", ["outsider", "foreign_agent"])
def test_workflow_writes_by_another_subject_never_reach_the_owners_workflow(request, owned, who):
    intruder = request.getfixturevalue(who)

    put = intruder.put("/api/v1/workflows/wf-1/checkpoint", {"current_step": "x"}, headers={"If-Match": '"1"'})
    record = intruder.post("/api/v1/workflows/wf-1/tool-calls", {"idempotency_key": "k1", "tool": "pay",
                                                                 "arguments": {"a": 2}})

    assert put.status_code == 412 and put.json()["current_version"] == 0  # no checkpoint of theirs
    assert record.status_code == 201  # their own call, under their own subject
    assert ToolCall.objects.get(subject=intruder.subject).arguments == {"a": 2}
    assert_untouched(owned)


def test_no_credentials_is_401_everywhere(owned):
    anonymous = APIClient()

    for method, url, body, _ in endpoints(owned) + OWN_SCOPE_ENDPOINTS:
        response = getattr(anonymous, method)(url, body, format="json") if body is not None else \
            getattr(anonymous, method)(url)
        assert response.status_code == 401, (method, url)
        assert response.json()["code"] == "not_authenticated"
    assert_untouched(owned)


def test_an_agent_key_without_a_principal_token_is_401_everywhere(owned, make_agent, tenant):
    keyonly = make_agent(tenant, subject=None)

    for method, url, body, headers in endpoints(owned) + OWN_SCOPE_ENDPOINTS:
        response = call(keyonly, method, url, body, headers)
        assert response.status_code == 401, (method, url)
        assert response.json()["code"] == "principal_required"
    assert_untouched(owned)
