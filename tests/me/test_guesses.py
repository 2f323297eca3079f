"""The assistant's guesses on /me/: marked unconfirmed; "That's right" confirms through the write gate
(the correction service the API's POST /memories/{id}/correct uses, same audit), "That's wrong" deletes."""

from __future__ import annotations

import pytest

from memory.consolidation import consolidate
from memory.deletion.models import DeletionJob
from memory.models import AuditEntry, Candidate, MemoryClass, MemoryRecord
from tests.consolidation.helpers import INFERRED, submit
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db


def guess(agent, field="cuisine", value="thai", text="Likes Thai food", event_id="evt_guess", said="",
          namespace=INFERRED) -> MemoryRecord:
    candidate = submit(agent, namespace=namespace, field=field, value=value, text=text, event_id=event_id,
                       said=said or "That green curry was the best thing I ate all week.")
    assert consolidate(candidate.pk) == "retrievable"
    return MemoryRecord.objects.get(pk=Candidate.objects.get(pk=candidate.pk).result_record_id)


def test_a_guess_is_marked_as_an_unconfirmed_guess_with_its_source(client, alice, agent):
    record = guess(agent)
    client.force_login(alice)

    html = client.get("/me/").content.decode()

    row = html[html.index(f'id="row-{record.pk}"'):]
    row = row[:row.index("</tr>")]
    assert ">Unconfirmed guess</span>" in row
    assert ('The assistant guessed this from</span>: <span class="quote">“That green curry was the best thing I ate '
            'all week.”</span>') in row
    assert '<strong class="unconfirmed">not confirmed</strong>' in row
    assert ">That's right</button>" in row and ">That's wrong</button>" in row
    assert total_guesses(client) == 1


def total_guesses(client) -> int:
    html = client.get("/me/", {"status": "candidate"}).content.decode()
    return html.count('class="memory-row" data-status="candidate"')


def _audit_shape(entries):
    return [(e.action, e.object_type, sorted(e.data)) for e in entries]


def test_thats_right_is_the_persons_own_statement_through_the_same_gate_and_audit_as_the_api(
        client, alice, agent, tenant):
    # Agents may only propose in user/inferred, so the API's correction of a guess there is refused; its
    # twin lives in a class where agents may also write, and the API corrects that one.
    MemoryClass.objects.create(tenant=tenant, name="hunches", namespace_prefix="user/hunches",
                               allowed_readers=["owner", "agent", "reviewer"], model_permission="write",
                               candidates_retrievable=True)
    mine = guess(agent)
    twin = guess(agent, field="airline", value="TAP", text="Flies with TAP", event_id="evt_twin",
                 said="The TAP lounge in Lisbon is my favourite.", namespace=["user", "hunches"])
    seat = guess(agent, field="seat", value="aisle", text="Sits on the aisle", event_id="evt_seat",
                 said="I always end up in the aisle seat.")
    refused = agent.post(f"/api/v1/memories/{seat.pk}/correct", {"fact": {"value": "window"}})
    assert refused.status_code == 422 and refused.json()["code"] == "class_not_allowed"
    client.force_login(alice)
    start = AuditEntry.objects.order_by("-pk").first().pk

    response = client.post(f"/me/memories/{mine.pk}/confirm", {"next": "/me/?status=candidate"})

    assert response.status_code == 302 and response["Location"] == "/me/?status=candidate"
    mine.refresh_from_db()
    confirmed = MemoryRecord.objects.get(supersedes=mine)
    assert confirmed.source_type == "explicit_user_statement" and confirmed.confidence == "confirmed"
    assert confirmed.status == "active" and confirmed.fact["value"] == "thai" and confirmed.text == "Likes Thai food"
    assert mine.status == "superseded" and mine.superseded_by_id == confirmed.pk
    assert confirmed.source_event.actor == f"user:{alice.pk}"
    by_ui = list(AuditEntry.objects.filter(pk__gt=start).order_by("pk"))
    assert {e.actor for e in by_ui} == {f"user:{alice.pk}"}

    # The API's correction of an identical guess writes the same audit rows (only the actor differs).
    middle = by_ui[-1].pk
    api = agent.post(f"/api/v1/memories/{twin.pk}/correct", {"fact": {"value": "TAP"}, "text": "Flies with TAP"})
    assert api.status_code in (200, 201), api.json()
    by_api = list(AuditEntry.objects.filter(pk__gt=middle).order_by("pk"))
    assert _audit_shape(by_ui) == _audit_shape(by_api) and by_ui[0].action == "memory.correct"
    assert by_ui[0].data["retired_candidates"] == [mine.pk] and by_api[0].data["retired_candidates"] == [twin.pk]

    html = client.get("/me/").content.decode()
    assert "You confirmed the assistant&#x27;s guess" in html and total_guesses(client) == 1  # the refused one
    # The agent is now served the person's statement, not a guess.
    served = agent.get("/api/v1/memories", {"namespace": "user/inferred", "status": "active"}).json()["results"]
    assert {r["memory_id"] for r in served} >= {confirmed.pk} and mine.pk not in {r["memory_id"] for r in served}


def test_thats_right_with_htmx_swaps_the_row_for_the_confirmed_memory(client, alice, agent):
    record = guess(agent)
    client.force_login(alice)

    html = client.post(f"/me/memories/{record.pk}/confirm", HTTP_HX_REQUEST="true").content.decode()

    confirmed = MemoryRecord.objects.get(supersedes=record)
    assert html.startswith("<tr") and f'id="row-{confirmed.pk}"' in html and ">Current</span>" in html
    assert "now remembered as something you said" in html and "That's right" not in html


def test_only_a_guess_can_be_confirmed(client, alice, agent):
    said = agent.post("/api/v1/memories", {
        "namespace": ["user"], "kind": "fact", "fact": {"field": "home", "value": "Porto"}, "text": "Lives in Porto",
        "source": {"type": "explicit_user_statement", "event_id": "evt_home"}}).json()["memory_id"]
    client.force_login(alice)

    response = client.post(f"/me/memories/{said}/confirm", follow=True)

    assert "Only a current, unconfirmed guess can be confirmed." in response.content.decode()
    assert MemoryRecord.objects.filter(field="home").count() == 1


def test_thats_wrong_deletes_the_guess_with_a_deletion_job_and_it_does_not_come_back(client, alice, agent):
    record = guess(agent)
    client.force_login(alice)

    response = client.post(f"/me/memories/{record.pk}/deny")

    job = DeletionJob.objects.get(memory_id=record.pk)
    assert response.status_code == 302 and job.requested_by == f"user:{alice.pk}"
    assert 'data-status="deleting"' in client.get("/me/").content.decode()
    assert run_job(job.pk) == "completed"
    assert record.pk not in client.get("/me/").content.decode()
    # The same guess, submitted again by the agent, is refused by the tombstone.
    again = agent.post("/api/v1/candidates", {
        "namespace": INFERRED, "kind": "preference", "fact": {"field": "cuisine", "value": "thai"},
        "text": "Likes Thai food", "source": {"type": "model_inferred", "event_id": "evt_guess"}})
    assert again.status_code == 409 and again.json()["code"] == "tombstoned"


def test_another_person_can_neither_confirm_nor_deny_my_guess(client, alice, bob, agent):
    record = guess(agent)
    client.force_login(bob)

    assert client.post(f"/me/memories/{record.pk}/confirm").status_code == 404
    assert client.post(f"/me/memories/{record.pk}/deny").status_code == 404
    assert client.get(f"/me/memories/{record.pk}/confirm").status_code in (404, 405)

    record.refresh_from_db()
    assert record.status == "active" and not DeletionJob.objects.exists()
    assert not MemoryRecord.objects.filter(supersedes=record).exists()
