"""A tenant with something on every surface, and keys narrowed by scope or by namespace.

``world`` writes, through the API, a record in ``user/travel_preferences`` and one in ``org`` for the
subject usr_owner, a pending candidate in each, a thread with an event, a summary, a checkpoint and a
tool call, a knowledge document, a published procedure with a proposal, and a retrieval log written
by the unrestricted key whose candidates quote both records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from memory.identity.access import reviewer_of
from tests.conftest import memory_body

USER_WORDS = "zqaisleseat"
ORG_WORDS = "zqorgbudget"


@dataclass
class World:
    owner: Any  # the unrestricted agent of usr_owner (read, write, propose)
    user_record: str
    org_record: str
    user_candidate: str
    org_candidate: str
    thread_id: str
    thread_event_id: str
    workflow_id: str
    tool_call_key: str
    document_id: int
    procedure: str
    proposal_id: str
    retrieval_id: str
    deletion_id: str  # a completed deletion of an org record (usr_owner's)


def write(agent: Any, namespace: list[str], field: str, value: str, text: str, event_id: str) -> str:
    response = agent.post("/api/v1/memories", memory_body(
        namespace=namespace, kind="fact", fact={"field": field, "value": value}, text=text,
        source={"type": "explicit_user_statement", "event_id": event_id, "text": f"I said {text}"}))
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]


def propose(agent: Any, namespace: list[str], field: str, value: str, event_id: str) -> str:
    response = agent.post("/api/v1/candidates", memory_body(
        namespace=namespace, kind="fact", fact={"field": field, "value": value}, text=f"Maybe {value}",
        source={"type": "model_inferred", "event_id": event_id, "text": f"inferred {value}"},
        evidence=[{"event_id": f"{event_id}_q", "text": f"quoted {value}"}]))
    assert response.status_code == 202, response.json()
    return response.json()["candidate_id"]


@pytest.fixture
def world(agent: Any, tenant: Any, django_user_model: Any) -> World:
    from memory.deletion.tasks import run_deletion
    from memory.identity.services import user_create
    from memory.knowledge.services import access_domain_create
    from procedures.services import procedure_publish

    owner = agent
    user_record = write(owner, ["user", "travel_preferences"], "seat", f"aisle {USER_WORDS}",
                        f"Prefers the aisle {USER_WORDS}", "evt_user_1")
    org_record = write(owner, ["org"], "budget", f"ten {ORG_WORDS}", f"Budget is ten {ORG_WORDS}", "evt_org_1")
    doomed = write(owner, ["org"], "doomed", "gone soon", "A fact to delete", "evt_org_2")
    user_candidate = propose(owner, ["user", "travel_preferences"], "meal", f"veg {USER_WORDS}", "evt_user_c")
    org_candidate = propose(owner, ["org"], "office", f"north {ORG_WORDS}", "evt_org_c")
    thread_id = owner.post("/api/v1/threads", {"title": "trip"}).json()["thread_id"]
    thread_event_id = owner.post(f"/api/v1/threads/{thread_id}/events", {
        "kind": "message", "role": "user", "text": "book me a flight"}).json()["event_id"]
    assert owner.post(f"/api/v1/threads/{thread_id}/summaries", {
        "text": "Wants a flight", "from_seq": 1, "to_seq": 1}).status_code == 201
    workflow_id = "wf_gate"
    assert owner.put(f"/api/v1/workflows/{workflow_id}/checkpoint", {"current_step": "search"},
                     headers={"If-None-Match": "*"}).status_code == 201
    assert owner.post(f"/api/v1/workflows/{workflow_id}/tool-calls", {
        "idempotency_key": "call-1", "tool": "search", "arguments": {"q": "flights"}}).status_code == 201
    access_domain_create(tenant=tenant, name="handbook", all_subjects=True)
    document = owner.post("/api/v1/documents", {"access_domain": "handbook", "external_id": "doc-1",
                                                "title": "Travel policy", "text": "Economy class for trips."})
    assert document.status_code == 201, document.json()
    rita = user_create(tenant=tenant, username="gate-rita", password="rita-pass-123", reviewer=True)
    procedure_publish(tenant=tenant, name="booking", body="Book economy.", reviewer=reviewer_of(rita))
    proposal = owner.post("/api/v1/procedures/booking/proposals", {"body": "Book economy first.",
                                                                   "rationale": "clarity"})
    assert proposal.status_code == 201, proposal.json()
    retrieval = owner.post("/api/v1/retrieve", {"query": f"aisle budget {USER_WORDS} {ORG_WORDS}"})
    assert retrieval.status_code == 200, retrieval.json()
    deletion = owner.delete(f"/api/v1/memories/{doomed}")
    assert deletion.status_code == 202, deletion.json()
    assert run_deletion(deletion.json()["deletion_id"]) == "completed"
    return World(owner=owner, user_record=user_record, org_record=org_record, user_candidate=user_candidate,
                 org_candidate=org_candidate, thread_id=thread_id, thread_event_id=thread_event_id,
                 workflow_id=workflow_id, tool_call_key="call-1", document_id=document.json()["document_id"],
                 procedure="booking", proposal_id=proposal.json()["proposal_id"],
                 retrieval_id=retrieval.json()["retrieval_id"], deletion_id=deletion.json()["deletion_id"])
