"""DELETE /api/v1/subject: everything about the principal's subject goes; only tombstones remain."""

from __future__ import annotations

import pytest

from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord, Subject, Tombstone
from tests.conftest import memory_body
from tests.deletion.helpers import rows_referencing, run_job, tables_containing

pytestmark = pytest.mark.django_db

MARKER = "erasemarker4417"


def _fill(agent) -> None:
    thread_id = agent.post("/api/v1/threads", {"title": f"{MARKER} thread"}).json()["thread_id"]
    agent.post(f"/api/v1/threads/{thread_id}/events", {"kind": "message", "role": "user", "text": f"hi {MARKER}"})
    agent.post(f"/api/v1/threads/{thread_id}/summaries", {"text": f"said {MARKER}", "from_seq": 1, "to_seq": 1})
    agent.put("/api/v1/workflows/wf_1/checkpoint", {"current_step": MARKER}, headers={"If-None-Match": "*"})
    for i, field in enumerate(["seat_preference", "meal_preference"]):
        agent.post("/api/v1/memories", memory_body(
            fact={"field": field, "value": f"{MARKER} {i}"}, text=f"Likes {MARKER} {i}",
            source={"type": "explicit_user_statement", "event_id": f"evt_{i}", "text": f"I like {MARKER} {i}"}))
    agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "inferred"], kind="trait", fact={"field": "mood", "value": f"{MARKER} mood"},
        text=f"Maybe {MARKER}", source={"type": "model_inferred", "event_id": "evt_c", "text": f"sigh {MARKER}"}))
    agent.post("/api/v1/retrieve", {"query": f"{MARKER} 1"})


def test_it_leaves_zero_rows_about_the_subject_except_tombstones(agent, outsider):
    _fill(agent)
    outsider.post("/api/v1/memories", memory_body(text="Outsider keeps this"))
    subject_pk = agent.subject.pk
    assert len(tables_containing(MARKER)) >= 8

    response = agent.delete("/api/v1/subject")

    assert response.status_code == 202, response.json()
    job_id = response.json()["deletion_id"]
    assert run_job(job_id) == "completed"
    assert tables_containing(MARKER) == []
    assert rows_referencing("memory_subject", subject_pk) == {}
    assert not Subject.objects.filter(pk=subject_pk).exists()
    # Not even the external id survives in plaintext (the job keeps a keyed hash). The fixture names the
    # agent key "key-usr_owner": an operator's label for a tenant's key, not a row about the subject.
    assert tables_containing("usr_owner") == ["memory_agentkey.name"]
    assert Tombstone.objects.filter(memory_id__startswith="mem_").count() == 2
    assert MemoryRecord.objects.filter(text="Outsider keeps this").count() == 1
    job = DeletionJob.objects.get(pk=job_id)
    assert job.subject_id is None and job.markers_sealed == "" and job.kind == "subject"


def test_the_erasure_status_stays_readable_with_the_subjects_token(agent, outsider):
    _fill(agent)
    job_id = agent.delete("/api/v1/subject").json()["deletion_id"]
    run_job(job_id)

    status = agent.get(f"/api/v1/deletions/{job_id}")

    assert status.status_code == 200 and status.json()["status"] == "completed"
    assert {s["name"] for s in status.json()["steps"]} >= {"subject", "records", "thread_events", "verification"}
    assert outsider.get(f"/api/v1/deletions/{job_id}").status_code == 404
    # Every other endpoint refuses the erased subject's token.
    assert agent.get("/api/v1/memories").status_code == 401


def test_erasing_twice_returns_the_running_job(agent):
    _fill(agent)
    first = agent.delete("/api/v1/subject").json()["deletion_id"]

    assert agent.delete("/api/v1/subject").json()["deletion_id"] == first


def test_it_needs_credentials_and_the_write_scope(client, make_agent, tenant, agent):
    _fill(agent)
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    assert client.delete("/api/v1/subject").status_code == 401
    assert reader.delete("/api/v1/subject").status_code == 403
    assert Subject.objects.filter(pk=agent.subject.pk).exists()


def test_an_erasure_of_many_records_redacts_their_audit_values_keeps_the_deletions_ids_and_completes(agent):
    # More records than the checks narrow their rows for: each is a marker, read by every check at once.
    items = [{"namespace": ["user", "notes"], "kind": "note", "fact": {"field": f"note_{n}", "value": f"{MARKER} {n}"},
              "text": f"Note {n} about {MARKER}", "source": {"type": "explicit_user_statement", "event_id": f"evt_{n}"}}
             for n in range(120)]
    written = agent.post("/api/v1/memories/batch", {"items": items})
    assert written.status_code == 200 and written.json()["created"] == 120, written.json()
    from memory.models import AuditEntry
    AuditEntry.objects.filter(subject_id=agent.subject.pk, action="memory.write").update(
        data={"reason": f"restated {MARKER}", "outcome": "activate"})  # a value that quotes the content

    job_id = agent.delete("/api/v1/subject").json()["deletion_id"]

    assert run_job(job_id) == "completed"
    assert "memory_auditentry.data" not in tables_containing(MARKER)
    erased = AuditEntry.objects.get(action="deletion.subject", object_id=job_id)
    assert len(erased.data["memory_ids"]) == 120
