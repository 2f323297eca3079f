"""A deletion and the worker deriving the same conversation's windows at once (real threads, real transactions)."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connection, transaction

from memory.deletion.models import DeletionStep
from memory.deletion.services import memory_delete
from memory.identity.services import subject_get_or_create, tenant_create
from memory.records.services import RecordInput, memory_write_batch
from memory.retrieval.context import lock_windows, refresh_context
from memory.retrieval.embedding import embed_record_ids
from memory.scope import Scope
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = ["Lea: Do you still swim at the lake?", "Sam: Every Sunday, even in the cold.",
         "Lea: I fixed my bike this week.", "Sam: My cousin helped me repaint the kitchen.",
         "Lea: The kitchen looked great.", "Sam: We booked flights to Porto."]


def test_a_deletion_waits_for_a_worker_deriving_the_same_windows_instead_of_deadlocking_with_it():
    tenant = tenant_create(slug="windows-race")
    subject = subject_get_or_create(tenant=tenant, external_id="usr_race")
    scope = Scope(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id="usr_race",
                  permissions=frozenset({"read", "write"}), namespaces=None, actor="test")
    started = dt.datetime(2026, 5, 2, 18, tzinfo=dt.UTC)
    written = memory_write_batch(scope=scope, items=[
        RecordInput(namespace="user/conversation", kind="conversation_turn", field=f"turn_{n}", value=text, text=text,
                    event_id=f"evt_race_{n}", memory_type="episodic", occurred_at=started + dt.timedelta(minutes=n))
        for n, text in enumerate(TURNS)])
    ids = [w.written.record.pk for w in written]
    embed_record_ids(ids)
    refresh_context(ids)
    job = memory_delete(scope=scope, memory_id=ids[3])
    worker_error: list[BaseException] = []

    def worker() -> None:
        # As the worker deriving a new batch's windows: it holds the subject's window lock, then (while the deletion
        # has started) rewrites the windows of the deleted turn's neighbours, the rows the deletion removes.
        try:
            with transaction.atomic():
                lock_windows([subject.pk])
                locked.set()
                time.sleep(1.5)
                refresh_context(ids[1:3] + ids[4:])
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            worker_error.append(exc)
        finally:
            connection.close()

    locked = threading.Event()
    thread = threading.Thread(target=worker)
    thread.start()
    assert locked.wait(10)
    status = run_job(job.pk)
    thread.join(30)

    assert worker_error == []
    assert status == "completed"
    steps = {s.name: s for s in DeletionStep.objects.filter(job_id=job.pk)}
    assert steps["context_windows"].attempts == 1 and steps["context_windows"].last_error == ""
