"""/api/v1/workflows/{id}/tool-calls: record before the effect, the verified outcome after, ask on resume."""

from __future__ import annotations

import pytest

from memory.models import AuditEntry
from memory.threads.models import ToolCall

pytestmark = pytest.mark.django_db

BASE = "/api/v1/workflows/wf-booking"
CALL = {"idempotency_key": "charge-1", "tool": "payments.charge", "arguments": {"amount_eur": 180, "order": "o-9"}}


def test_it_records_a_pending_call_before_the_effect(agent):
    response = agent.post(f"{BASE}/tool-calls", CALL)

    assert response.status_code == 201
    assert response.json()["status"] == "pending"
    assert response.json()["outcome"] is None
    assert AuditEntry.objects.filter(action="tool_call.record", object_id="charge-1").exists()


def test_recording_the_same_call_again_returns_it_with_200(agent):
    agent.post(f"{BASE}/tool-calls", CALL)

    again = agent.post(f"{BASE}/tool-calls", CALL)

    assert again.status_code == 200
    assert ToolCall.objects.count() == 1


def test_the_same_key_with_other_arguments_is_409(agent):
    agent.post(f"{BASE}/tool-calls", CALL)

    response = agent.post(f"{BASE}/tool-calls", {**CALL, "arguments": {"amount_eur": 999}})

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_conflict"


def test_it_records_the_verified_outcome_once(agent):
    agent.post(f"{BASE}/tool-calls", CALL)
    outcome = {"charge_id": "ch_123", "amount_eur": 180}

    done = agent.patch(f"{BASE}/tool-calls/charge-1", {"status": "succeeded", "outcome": outcome})
    repeat = agent.patch(f"{BASE}/tool-calls/charge-1", {"status": "succeeded", "outcome": outcome})
    different = agent.patch(f"{BASE}/tool-calls/charge-1", {"status": "failed", "outcome": {"error": "x"}})

    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    assert done.json()["outcome"] == outcome and done.json()["outcome_at"]
    assert repeat.status_code == 200
    assert different.status_code == 409 and different.json()["code"] == "outcome_already_recorded"
    assert AuditEntry.objects.filter(action="tool_call.complete").count() == 1


@pytest.mark.parametrize("body", [{"status": "pending", "outcome": None}, {"outcome": {}}, {"status": "succeeded"}])
def test_an_invalid_outcome_is_400(agent, body):
    agent.post(f"{BASE}/tool-calls", CALL)

    assert agent.patch(f"{BASE}/tool-calls/charge-1", body).status_code == 400
    assert ToolCall.objects.get().status == "pending"


def test_unknown_calls_are_404(agent):
    assert agent.get(f"{BASE}/tool-calls/nope").status_code == 404
    assert agent.patch(f"{BASE}/tool-calls/nope", {"status": "succeeded", "outcome": {}}).status_code == 404


def test_it_refuses_secrets_in_arguments(agent):
    response = agent.post(f"{BASE}/tool-calls", {**CALL, "arguments": {"card": "4111-1111-1111-1111"}})

    assert response.status_code == 422
    assert not ToolCall.objects.exists()


def test_resume_after_a_crash_sees_the_recorded_call_instead_of_charging_again(agent, make_agent, tenant):
    """Worker A records the charge, performs it, and dies before writing the outcome. Worker B resumes."""
    checkpoint_url = f"{BASE}/checkpoint"
    # Worker A: checkpoint before the side effect, naming the call's idempotency key.
    agent.put(checkpoint_url, {"current_step": "charge_card", "completed_steps": ["choose_flight"],
                               "tool_call_id": "call_7", "idempotency_key": "charge-1"},
              headers={"If-None-Match": "*"})
    assert agent.post(f"{BASE}/tool-calls", CALL).status_code == 201
    charges_made = ["ch_123"]  # the payment provider charged the card ...and worker A crashed here.

    # Worker B: another process (its own key), same principal. It reads the checkpoint...
    resumer = make_agent(tenant, "usr_owner")
    checkpoint = resumer.get(checkpoint_url)
    assert checkpoint.status_code == 200
    key = checkpoint.json()["idempotency_key"]
    # ...and asks whether the effect may already have happened before charging again.
    lookup = resumer.get(f"{BASE}/tool-calls/{key}")
    assert lookup.status_code == 200  # recorded: do not charge blindly (a 404 would mean "never attempted")
    call = lookup.json()
    assert call["status"] == "pending" and call["arguments"] == CALL["arguments"] and call["tool"] == CALL["tool"]
    # It verifies with the provider (which knows ch_123 under this idempotency key) and records it.
    done = resumer.patch(f"{BASE}/tool-calls/{key}", {"status": "succeeded", "outcome": {"charge_id": "ch_123"}})
    assert done.status_code == 200
    # Re-recording the call (a retry of worker A's POST) does not reset it to pending.
    assert resumer.post(f"{BASE}/tool-calls", CALL).json()["status"] == "succeeded"
    resumed = resumer.put(checkpoint_url, {"current_step": "send_receipt", "completed_steps": ["choose_flight",
                          "charge_card"], "last_verified_outcome": {"charge_id": "ch_123"}},
                          headers={"If-Match": checkpoint["ETag"]})
    assert resumed.status_code == 200 and resumed["ETag"] == '"2"'
    assert charges_made == ["ch_123"]
    assert ToolCall.objects.count() == 1
    # The crashed worker, waking up with its old ETag, cannot overwrite the resumed state.
    assert agent.put(checkpoint_url, {"current_step": "charge_card"}, headers={"If-Match": '"1"'}).status_code == 412
