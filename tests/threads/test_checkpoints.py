"""PUT/GET /api/v1/workflows/{id}/checkpoint: versioned state, ETag on read, If-Match required on write."""

from __future__ import annotations

import pytest

from memory.models import AuditEntry
from memory.threads.models import Checkpoint
from tests.threads.conftest import new_thread

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/wf-booking/checkpoint"
STATE = {
    "current_step": "charge_card",
    "completed_steps": ["search", "choose_flight"],
    "pending_approval": None,
    "tool_call_id": "call_7",
    "idempotency_key": "charge-wf-booking-1",
    "artifacts": {"flight": "TP1234", "price_eur": 180},
    "last_verified_outcome": {"step": "choose_flight", "result": "TP1234"},
}


def create(agent, body=None, url=URL):
    return agent.put(url, body or STATE, headers={"If-None-Match": "*"})


def test_it_creates_the_first_checkpoint_with_if_none_match_star(agent):
    response = create(agent)

    assert response.status_code == 201
    assert response["ETag"] == '"1"'
    body = response.json()
    assert body["version"] == 1
    assert {k: body[k] for k in STATE} == STATE
    assert AuditEntry.objects.filter(action="checkpoint.put", object_id="wf-booking").count() == 1


def test_it_also_creates_with_if_match_zero(agent):
    response = agent.put(URL, STATE, headers={"If-Match": '"0"'})

    assert response.status_code == 201
    assert response["ETag"] == '"1"'


def test_get_returns_the_state_and_its_etag(agent):
    create(agent)

    response = agent.get(URL)

    assert response.status_code == 200
    assert response["ETag"] == '"1"'
    assert response.json()["artifacts"] == STATE["artifacts"]


def test_it_replaces_the_checkpoint_when_if_match_names_the_current_version(agent):
    create(agent)

    response = agent.put(URL, {**STATE, "current_step": "send_receipt"}, headers={"If-Match": '"1"'})

    assert response.status_code == 200
    assert response["ETag"] == '"2"'
    assert agent.get(URL).json()["current_step"] == "send_receipt"


def test_a_write_without_a_precondition_is_428(agent):
    create(agent)

    response = agent.put(URL, {**STATE, "current_step": "x"})

    assert response.status_code == 428
    assert response.json()["code"] == "precondition_required"
    assert Checkpoint.objects.get().current_step == "charge_card"


def test_a_stale_if_match_is_412_and_nothing_is_written(agent):
    create(agent)
    agent.put(URL, {**STATE, "current_step": "send_receipt"}, headers={"If-Match": '"1"'})
    audits = AuditEntry.objects.count()

    response = agent.put(URL, {**STATE, "current_step": "charge_card_again"}, headers={"If-Match": '"1"'})

    assert response.status_code == 412
    assert response.json()["code"] == "precondition_failed"
    assert response.json()["current_version"] == 2
    checkpoint = Checkpoint.objects.get()
    assert checkpoint.version == 2 and checkpoint.current_step == "send_receipt"
    assert AuditEntry.objects.count() == audits


def test_creating_over_an_existing_checkpoint_is_412(agent):
    create(agent)

    response = create(agent, {**STATE, "current_step": "over"})

    assert response.status_code == 412
    assert Checkpoint.objects.get().current_step == "charge_card"


def test_if_match_on_a_missing_checkpoint_is_412(agent):
    response = agent.put(URL, STATE, headers={"If-Match": '"3"'})

    assert response.status_code == 412
    assert not Checkpoint.objects.exists()


@pytest.mark.parametrize("headers", [{"If-Match": "*"}, {"If-Match": '"abc"'}, {"If-None-Match": '"1"'}])
def test_unusable_preconditions_are_400(agent, headers):
    response = agent.put(URL, STATE, headers=headers)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_precondition"


def test_it_refuses_unknown_fields_and_secrets(agent):
    unknown = agent.put(URL, {**STATE, "version": 9}, headers={"If-None-Match": "*"})
    secret = agent.put(URL, {**STATE, "artifacts": {"note": "api_key = sk_live_abcdefghijklmnop1234"}},
                       headers={"If-None-Match": "*"})

    assert unknown.status_code == 400
    assert secret.status_code == 422 and secret.json()["code"] == "secret_detected"
    assert not Checkpoint.objects.exists()


def test_it_links_a_thread_of_the_same_subject_only(agent, outsider):
    mine = new_thread(agent)
    theirs = new_thread(outsider)

    ok = create(agent, {**STATE, "thread_id": mine})
    refused = create(agent, {**STATE, "thread_id": theirs}, url="/api/v1/workflows/wf-2/checkpoint")

    assert ok.status_code == 201 and ok.json()["thread_id"] == mine
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_thread"


def test_a_missing_checkpoint_is_404(agent):
    assert agent.get(URL).status_code == 404


def test_workflow_ids_are_per_subject(agent, outsider):
    create(agent)

    assert outsider.get(URL).status_code == 404
    assert outsider.put(URL, STATE, headers={"If-Match": '"1"'}).status_code == 412
    # The outsider's own workflow of the same name is a separate checkpoint.
    assert create(outsider, {**STATE, "current_step": "theirs"}).status_code == 201
    assert agent.get(URL).json()["current_step"] == "charge_card"
