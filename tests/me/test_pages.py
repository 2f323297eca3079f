"""/me/: a person's own memories; nobody else's, whatever their other permissions."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord, Subject
from tests.conftest import memory_body
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory_id(agent):
    return agent.post("/api/v1/memories", memory_body()).json()["memory_id"]


def _pages(memory_id: str, job_id: str = "del_x") -> list[str]:
    return ["/me/", "/me/export", "/me/erase", f"/me/memories/{memory_id}/", f"/me/memories/{memory_id}/correct",
            f"/me/memories/{memory_id}/delete", f"/me/deletions/{job_id}"]


def test_every_page_needs_a_login(client, memory_id):
    for url in [*_pages(memory_id), "/me/deletions/"]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    for url in ["/me/delete-selected", f"/me/memories/{memory_id}/confirm", f"/me/memories/{memory_id}/deny"]:
        response = client.post(url, {"ids": [memory_id], "confirm": "yes"})
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    assert not DeletionJob.objects.exists()


def test_it_lists_my_memories_newest_first_with_provenance_in_words(client, alice, agent, memory_id):
    agent.post("/api/v1/memories", memory_body(
        namespace=["episodes"], kind="episode", fact={"field": "trip", "value": "Lisbon"}, text="Went to Lisbon",
        source={"type": "explicit_user_statement", "event_id": "evt_trip", "text": "We flew to Lisbon"}))
    client.force_login(alice)

    page = client.get("/me/").content.decode()

    assert page.index("Went to Lisbon") < page.index("Prefers aisle seats")  # newest first
    today = timezone.now()
    assert 'You said</span>: <span class="quote">“I always take the aisle seat.”</span> — <time' in page
    assert f">{today.day} {today:%B %Y}</time>" in page
    assert ">Current</span>" in page and "user/travel_preferences" in page and "episodes" in page
    assert "explicit_user_statement<" not in page and ">active<" not in page  # no internal words as text


def test_history_shows_the_versions(client, alice, agent, memory_id):
    client.force_login(alice)
    client.post(f"/me/memories/{memory_id}/correct", {"value": "window", "text": "Prefers window seats"})
    new_id = MemoryRecord.objects.get(status="active").pk

    page = client.get(f"/me/memories/{new_id}/").content.decode()

    assert memory_id in page and new_id in page and ">Replaced</span>" in page and ">Current</span>" in page


def test_correct_makes_a_new_record_as_the_person(client, alice, memory_id):
    client.force_login(alice)

    response = client.post(f"/me/memories/{memory_id}/correct", {"value": "window", "text": "Prefers window seats"})

    assert response.status_code == 302
    new = MemoryRecord.objects.get(status="active")
    assert new.fact["value"] == "window" and new.supersedes_id == memory_id
    assert new.source_event.actor == f"user:{alice.pk}"


def test_delete_asks_first_then_shows_the_job(client, alice, memory_id):
    client.force_login(alice)

    confirm = client.get(f"/me/memories/{memory_id}/delete")
    assert "Delete permanently" in confirm.content.decode()
    assert not DeletionJob.objects.exists()

    response = client.post(f"/me/memories/{memory_id}/delete")
    job = DeletionJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/me/deletions/{job.pk}"
    assert job.requested_by == f"user:{alice.pk}"
    pending = client.get(f"/me/deletions/{job.pk}").content.decode()
    assert 'hx-trigger="every 1s"' in pending and 'http-equiv="refresh"' in pending
    run_job(job.pk)
    done = client.get(f"/me/deletions/{job.pk}", HTTP_HX_REQUEST="true").content.decode()
    assert ">Completed</span>" in done and "hx-trigger" not in done and "<html" not in done


def test_export_downloads_my_data_as_json(client, alice, memory_id):
    client.force_login(alice)

    response = client.get("/me/export")

    assert response["Content-Disposition"].startswith("attachment")
    assert json.loads(response.content)["records"][0]["memory_id"] == memory_id


def test_delete_everything_needs_the_typed_phrase(client, alice, agent, memory_id):
    client.force_login(alice)
    subject = Subject.objects.get(external_id="usr_owner")

    wrong = client.post("/me/erase", {"subject": subject.pk, "confirm": "yes"})
    assert wrong.status_code == 200 and "Type exactly" in wrong.content.decode()
    assert not DeletionJob.objects.exists()

    right = client.post("/me/erase", {"subject": subject.pk, "confirm": "delete everything"})
    job = DeletionJob.objects.get(kind="subject")
    assert right["Location"] == f"/me/deletions/{job.pk}"
    assert run_job(job.pk) == "completed"
    assert not Subject.objects.filter(pk=subject.pk).exists()
    # The person can still watch their erasure's status, though the subject is gone.
    assert "completed" in client.get(f"/me/deletions/{job.pk}").content.decode()


def test_another_person_sees_none_of_it_even_by_direct_url(client, alice, bob, memory_id):
    client.force_login(alice)
    client.post(f"/me/memories/{memory_id}/delete")
    job = DeletionJob.objects.get()
    client.force_login(bob)

    assert "Prefers aisle seats" not in client.get("/me/").content.decode()
    for url in _pages(memory_id, job.pk)[3:]:
        assert client.get(url).status_code == 404, url
    assert client.post(f"/me/memories/{memory_id}/correct", {"value": "x"}).status_code == 404
    assert client.post(f"/me/memories/{memory_id}/delete").status_code == 404
    alice_subject = Subject.objects.get(external_id="usr_owner")
    assert client.get(f"/me/?subject={alice_subject.pk}").status_code == 404
    assert client.get(f"/me/deletions/?subject={alice_subject.pk}").status_code == 404
    assert job.pk not in client.get("/me/deletions/").content.decode()
    assert client.post("/me/erase", {"subject": alice_subject.pk, "confirm": "delete everything"}).status_code == 404
    assert "Prefers aisle seats" not in client.get("/me/export").content.decode()


def test_a_reviewer_sees_nothing_here_without_a_subject(client, rita, memory_id):
    client.force_login(rita)

    page = client.get("/me/").content.decode()

    assert "not linked to any memories" in page and "Prefers aisle seats" not in page
    assert client.get(f"/me/memories/{memory_id}/").status_code == 404
    assert client.get("/me/export").status_code == 404


def test_a_person_with_two_subjects_picks_one(client, alice, tenant, make_agent):
    other = make_agent(tenant, "usr_second")
    other.post("/api/v1/memories", memory_body(text="Second subject memory"))
    second = Subject.objects.get(external_id="usr_second")
    second.users.add(alice, through_defaults={"tenant": second.tenant})
    client.force_login(alice)

    page = client.get(f"/me/?subject={second.pk}").content.decode()

    assert "Second subject memory" in page and "usr_owner" in page  # the picker lists both
