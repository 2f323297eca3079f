"""manage.py backup / restore on the real embedded PostgreSQL: every row back, retrieval unchanged, and a
deletion requested after the backup re-applied from the deletion journal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from memory.backup import EXCLUDED_TABLE_DATA
from memory.deletion.models import DeletionJob
from memory.identity.access import reviewer_of
from memory.identity.services import user_create
from memory.models import MemoryRecord, Tombstone
from memory.retrieval.embedding import embed_record_ids
from procedures.services import procedure_publish
from tests.conftest import memory_body
from tests.deletion.helpers import run_job, tables_containing

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "qzvrestore4471"


@pytest.fixture(autouse=True)
def _dirs(settings: Any, tmp_path: Path) -> None:
    settings.ENGRAM_DELETION_JOURNAL = tmp_path / "journal"
    settings.ENGRAM_BACKUP_DIR = tmp_path / "backups"
    settings.ENGRAM_DELETION_RETRY_BASE_SECONDS = 0.01


def _remember(agent: Any, field: str, value: str, text: str, event_id: str) -> str:
    created = agent.post("/api/v1/memories", memory_body(
        fact={"field": field, "value": value}, text=text,
        source={"type": "explicit_user_statement", "event_id": event_id, "text": text}))
    assert created.status_code == 201, created.json()
    memory_id = created.json()["memory_id"]
    assert embed_record_ids([memory_id]) == 1
    return str(memory_id)


def _table_digests() -> dict[str, str]:
    """Every table's whole content as one hash (rows sorted by their text form)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        tables = [t for (t,) in cursor.fetchall() if t not in EXCLUDED_TABLE_DATA]
        digests = {}
        for table in tables:
            cursor.execute(f'SELECT count(*), md5(coalesce(string_agg(x, \'|\' ORDER BY x), \'\')) '
                           f'FROM (SELECT t::text AS x FROM "{table}" t) rows')
            count, digest = cursor.fetchone()
            digests[table] = f"{count}:{digest}"
    return digests


def _packets(agent: Any, query: str) -> list[tuple[Any, ...]]:
    response = agent.post("/api/v1/retrieve", {"query": query})
    assert response.status_code == 200, response.json()
    return [(p.get("memory_id"), p.get("fact"), p.get("score")) for p in response.json()["packets"]]


def test_it_serves_the_same_retrieval_after_a_restore_with_every_row_back(agent: Any, tenant: Any,
                                                                          tmp_path: Path) -> None:
    for n, (value, text) in enumerate([("aisle", "Prefers aisle seats on long flights"),
                                       ("vegetarian", "Eats vegetarian meals only"),
                                       ("Lisbon", "Lives in Lisbon near the river")]):
        _remember(agent, f"field_{n}", value, text, f"evt_{n}")
    thread_id = agent.post("/api/v1/threads", {"title": "trip"}).json()["thread_id"]
    assert agent.post(f"/api/v1/threads/{thread_id}/events",
                      {"kind": "message", "role": "user", "text": "Book the aisle seat"}).status_code == 201
    assert agent.put("/api/v1/workflows/wf_trip/checkpoint", {"thread_id": thread_id, "current_step": "book"},
                     headers={"If-None-Match": "*"}).status_code in (200, 201)
    assert agent.post("/api/v1/candidates", memory_body(
        fact={"field": "meal", "value": "vegan"}, text="Might be vegan",
        source={"type": "model_inferred", "event_id": "evt_guess", "text": "user skipped the cheese"}),
    ).status_code == 202
    reviewer = user_create(tenant=tenant, username="rita", password="pw-rita", reviewer=True)
    procedure_publish(tenant=tenant, name="booking", body="Book economy.", reviewer=reviewer_of(reviewer))
    before = _packets(agent, "which seat on a long flight")
    assert before and before[0][1]
    digests = _table_digests()
    archive = tmp_path / "engram.dump"

    call_command("backup", "--output", str(archive), "--no-progress")
    # Written after the backup: gone after the restore.
    later = _remember(agent, "field_later", "window", "Prefers window seats on long flights", "evt_later")
    call_command("restore", str(archive), "--no-journal", "--no-safety-backup", "--no-progress", "--disconnect")

    assert not MemoryRecord.objects.filter(pk=later).exists()
    restored = _table_digests()
    # The broker's table differs by the two derived-data sweeps the restore queued; every other table is
    # byte for byte what the backup saw.
    queued = restored.pop("django_q_ormq"), digests.pop("django_q_ormq")
    assert int(queued[0].split(":")[0]) == int(queued[1].split(":")[0]) + 2
    assert {t: d for t, d in restored.items() if d != digests.get(t)} == {}
    assert set(restored) == set(digests)
    assert _packets(agent, "which seat on a long flight") == before
    with connection.cursor() as cursor:  # the planner knows the restored tables (ANALYZE, not only the rows)
        cursor.execute("SELECT count(*) FROM pg_stats "
                       "WHERE tablename = 'memory_memoryrecord' AND attname = 'subject_id'")
        assert cursor.fetchone()[0] == 1


def test_it_reapplies_a_deletion_requested_after_the_backup_from_the_journal(agent: Any, tmp_path: Path) -> None:
    kept = _remember(agent, "home", "Porto", "Lives in Porto", "evt_home")
    early = _remember(agent, "pet", f"{MARKER} cat", f"Has a {MARKER} cat", "evt_pet")
    late = _remember(agent, "seat", f"{MARKER} aisle", f"Prefers {MARKER} aisle seats", "evt_seat")
    early_job = agent.delete(f"/api/v1/memories/{early}").json()["deletion_id"]
    assert run_job(early_job) == "completed"  # completed before the backup: stays deleted
    archive = tmp_path / "engram.dump"
    call_command("backup", "--output", str(archive), "--no-progress")
    late_job = agent.delete(f"/api/v1/memories/{late}").json()["deletion_id"]
    assert run_job(late_job) == "completed"
    journal = sorted((tmp_path / "journal").glob("deletions-*.jsonl"))
    assert len(journal) == 1 and len(journal[0].read_text().splitlines()) == 2
    assert MARKER not in journal[0].read_text()  # ids and keyed hashes only

    call_command("restore", str(archive), "--no-safety-backup", "--no-progress", "--disconnect")

    job = DeletionJob.objects.get(pk=late_job)  # the id the client was given resolves again
    assert job.status == DeletionJob.Status.COMPLETED and job.markers_sealed == ""
    assert agent.get(f"/api/v1/deletions/{late_job}").json()["status"] == "completed"
    for memory_id in (early, late):
        assert MemoryRecord.objects.get(pk=memory_id).status == "deleted"
        assert Tombstone.objects.filter(memory_id=memory_id).exists()
        detail = agent.get(f"/api/v1/memories/{memory_id}")
        assert detail.json()["status"] == "deleted" and MARKER not in detail.content.decode()
    assert tables_containing(MARKER) == []
    served = [p[0] for p in _packets(agent, f"{MARKER} aisle seats")]
    assert late not in served and early not in served
    assert kept in [p[0] for p in _packets(agent, "Where does the user live?")]
    # A second replay finds nothing left to do.
    call_command("restore", "--replay-only")
    assert DeletionJob.objects.count() == 2


def test_it_refuses_to_restore_without_a_deletion_journal(agent: Any, tmp_path: Path) -> None:
    _remember(agent, "home", "Porto", "Lives in Porto", "evt_home")
    archive = tmp_path / "engram.dump"
    call_command("backup", "--output", str(archive), "--no-progress")

    with pytest.raises(CommandError, match="deletion journal"):
        call_command("restore", str(archive), "--no-safety-backup", "--no-progress", "--disconnect")
    assert MemoryRecord.objects.count() == 1


def test_it_reapplies_an_erasure_and_a_deleted_thread_event_after_the_restore(agent: Any, outsider: Any,
                                                                              tmp_path: Path) -> None:
    thread_id = agent.post("/api/v1/threads", {"title": "trip"}).json()["thread_id"]
    said = agent.post(f"/api/v1/threads/{thread_id}/events",
                      {"kind": "message", "role": "user", "text": f"My code is {MARKER}"}).json()["event_id"]
    _remember(outsider, "pet", f"{MARKER} dog", f"Has a {MARKER} dog", "evt_dog")
    archive = tmp_path / "engram.dump"
    call_command("backup", "--output", str(archive), "--no-progress")
    assert agent.delete(f"/api/v1/threads/{thread_id}/events/{said}").status_code == 200
    erasure = outsider.delete("/api/v1/subject").json()["deletion_id"]
    assert run_job(erasure) == "completed"

    call_command("restore", str(archive), "--no-safety-backup", "--no-progress", "--disconnect")

    assert tables_containing(MARKER) == []
    events = agent.get(f"/api/v1/threads/{thread_id}/events").json()
    assert MARKER not in str(events)
    assert DeletionJob.objects.get(pk=erasure).status == DeletionJob.Status.COMPLETED
    assert not MemoryRecord.objects.filter(subject_id=outsider.subject.pk).exclude(status="deleted").exists()
