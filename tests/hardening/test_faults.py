"""Faults, with real processes: a worker killed in the middle of a deletion, the database restarted under
writes, the embedding model failing. Nothing acknowledged is lost, nothing is written twice, a deletion
always completes and is verified, and clients always get a {"code", "detail"} answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from config.embedded_db import ensure_server, stop_server
from memory.deletion.models import DeletionJob, DeletionStep
from memory.models import MemoryRecord
from tests.conftest import memory_body, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parent.parent.parent


def start_urgent_worker(*, warm: bool) -> subprocess.Popen[bytes]:
    """The deletion queue's qcluster, with a short lease (15 s) so a dead worker's job is handed out again
    soon; ``warm`` loads the model at start, outside the job's 12 s timeout (a one-record deletion takes
    about a second)."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, start_new_session=True,
        env={**os.environ, "Q_CLUSTER_NAME": "urgent", "ENGRAM_DB_NAME": connection.settings_dict["NAME"],
             "ENGRAM_WARMUP": "1" if warm else "0", "ENGRAM_Q_URGENT_TIMEOUT": "12",
             "ENGRAM_Q_URGENT_RETRY": "15"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to qcluster and every process it started: nothing gets to clean up."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)  # qcluster stops its own children
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        kill_group(process)


def raw_connection() -> psycopg.Connection[Any]:
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], user=s["USER"], dbname=s["NAME"], port=s.get("PORT") or None)


def waiting_on_a_lock(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock' AND query ILIKE '%%memory_memoryrecord%%'").fetchone()
    return bool(row and row[0])


def test_a_deletion_whose_worker_was_killed_resumes_and_completes_verified(agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    blocker = raw_connection()
    observer = raw_connection()
    observer.autocommit = True
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    # Hold the record's row (no worker runs yet): the job runs its first steps, then waits at the text-index
    # step, mid-way.
    blocker.execute("SELECT 1 FROM memory_memoryrecord WHERE id = %s FOR UPDATE", [memory_id])
    first = start_urgent_worker(warm=False)
    try:
        wait_for(lambda: waiting_on_a_lock(observer), timeout=60)
        done_before = set(DeletionStep.objects.filter(job_id=job_id, status="done").values_list("name", flat=True))
        assert DeletionJob.objects.get(pk=job_id).status == "running"
        assert "candidates" in done_before and "verification" not in done_before

        kill_group(first)  # the whole qcluster: sentinel, pusher, worker
        blocker.rollback()  # the dead worker's statement ends with it; nothing it did after the kill is kept

        second = start_urgent_worker(warm=True)
        try:
            job = wait_for(lambda: (j := DeletionJob.objects.get(pk=job_id)).status == "completed" and j,
                           timeout=150)
        finally:
            stop_worker(second)
    finally:
        if first.poll() is None:
            kill_group(first)
        blocker.close()
        observer.close()

    assert job.runs == 2  # claimed by the killed worker, resumed by the second
    steps = {s.name: s for s in DeletionStep.objects.filter(job_id=job_id)}
    assert all(s.status == "done" for s in steps.values())
    assert all(steps[name].attempts == 1 for name in done_before)  # finished steps were not run again
    record = agent.get(f"/api/v1/memories/{memory_id}").json()
    assert record["status"] == "deleted" and record["text"] == "" and "aisle" not in str(record)


@pytest.mark.serial  # stops the database server every other test uses
def test_database_restart_under_writes_gives_503_and_retries_write_exactly_once(served, make_agent, tenant):
    agent = make_agent(tenant, "usr_owner")
    server = served()
    server.headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token}
    outcomes: dict[str, list[int]] = {}
    codes: set[str] = set()
    stop = threading.Event()
    lock = threading.Lock()

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            event_id = f"evt_{n}_{i}"
            body = memory_body(fact={"field": f"f_{n}_{i}", "value": f"value {n} {i}"}, text=f"Fact {n} {i}",
                               source={"type": "explicit_user_statement", "event_id": event_id})
            statuses: list[int] = []
            for _attempt in range(200):  # the same request, same event id, until it is acknowledged
                try:
                    status, payload, _ = server.call("POST", "/api/v1/memories", body, timeout=10)
                except OSError:
                    status, payload = 0, None
                statuses.append(status)
                if status >= 500 and isinstance(payload, dict):
                    with lock:
                        codes.add(payload.get("code", ""))
                if status in (200, 201):
                    break
                time.sleep(0.2)
            with lock:
                outcomes[event_id] = statuses
            i += 1

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(2)
        connection.close()
        stop_server(ROOT)  # the database goes away under the writers
        time.sleep(3)
        ensure_server(ROOT)
        time.sleep(3)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
        connection.close()  # this process's own connection died with the server

    all_statuses = [s for seq in outcomes.values() for s in seq]
    assert 503 in all_statuses and codes <= {"database_unavailable", "database_busy"} and codes
    assert not any(s >= 500 and s != 503 for s in all_statuses), sorted(set(all_statuses))
    assert all(seq[-1] in (200, 201) for seq in outcomes.values())  # every write was acknowledged in the end
    stored = MemoryRecord.objects.filter(source_event__external_id__in=list(outcomes))
    assert stored.count() == len(outcomes)  # exactly one record per event id, retries included
    assert len({r.source_event_id for r in stored}) == len(outcomes)


def test_with_the_embedding_model_broken_writes_land_and_retrieval_answers_lexically(served, make_agent, tenant,
                                                                                    tmp_path):
    agent = make_agent(tenant, "usr_owner")
    # The model's export is missing and no fallback is allowed: every process's first use of the model fails at once
    # (a broken model directory fails too, after importing PyTorch, which only made this test slower).
    server = served({"ENGRAM_EMBEDDER": "onnx", "ENGRAM_MODEL_CACHE": str(tmp_path / "no-model")},
                    queues="urgent,engram", need_worker=True)
    server.headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token}

    status, written, _ = server.call("POST", "/api/v1/memories", memory_body(text="Prefers aisle seats on trains"))
    assert status == 201
    status, answer, _ = server.call("POST", "/api/v1/retrieve", {"query": "aisle seats"}, timeout=60)
    assert status == 200, answer
    assert [p["memory_id"] for p in answer["packets"]] == [written["memory_id"]]  # found by the lexical leg
    assert answer["degraded"] == ["semantic_unavailable"]
    assert answer["dropped"]["semantic_unavailable"] == 1
    assert answer["dropped"].get("semantic_pending") == 1  # the write is there, its embedding is not
    status, again, _ = server.call("POST", "/api/v1/retrieve", {"query": "aisle seats"}, timeout=60)
    assert status == 200 and again["degraded"] == ["semantic_unavailable"]
    # A deletion still completes and verifies (its read checks run lexically too).
    status, accepted, _ = server.call("DELETE", f"/api/v1/memories/{written['memory_id']}")
    assert status == 202
    wait_for(lambda: server.call("GET", accepted["status_url"])[1]["status"] == "completed", timeout=90)
