"""Two `serve` nodes, each with its web server and a worker per queue, against one PostgreSQL reached by
DATABASE_URL over TCP — the shape of a deployment on a managed database. Concurrent clients split across the
nodes: idempotency, the precedence locks, checkpoint versions, deletion jobs and rate limits hold across them,
because every one of them is decided in the database, never in a process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import memory_body, wait_for
from tests.hardening.conftest import ROOT, Server, free_port, launch_serve, stop_serve, wait_serving
from tests.hardening.tcp_postgres import tcp_postgres

pytestmark = pytest.mark.worker
RATE = 150  # per minute per key, on both nodes together


# The operator's set-up commands, in one process (each `manage.py` run pays Django's start-up): the last line
# each prints, one per line.
SET_UP = """
import io
import django
django.setup()
from django.core.management import call_command
def last_line(*args):
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]
call_command("migrate", "--noinput", verbosity=0)
call_command("create_tenant", "acme", stdout=io.StringIO())
print(last_line("create_agent_key", "--tenant", "acme", "--name", "agents", "--scopes", "read,write,mint"))
print(last_line("create_agent_key", "--tenant", "acme", "--name", "limited", "--scopes", "read"))
print(last_line("mint_principal_token", "--tenant", "acme", "--subject", "usr_owner", "--ttl", "3600"))
"""


def set_up(url: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", SET_UP], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings"},
                            check=True)
    return result.stdout.strip().splitlines()[-3:]


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, Any]]:
    with tcp_postgres(free_port()) as url:
        key, limited, token = set_up(url)
        env = {"DATABASE_URL": url, "ENGRAM_THROTTLE_KEY_RATE": f"{RATE}/min"}
        nodes = [launch_serve(env, queues="urgent,engram,bulk") for _ in range(2)]  # starting side by side
        try:
            for node in nodes:
                wait_serving(node, need_worker=True)
            yield {"url": url, "nodes": nodes, "key": key, "limited": limited, "token": token}
        finally:
            for node in nodes:
                stop_serve(node)


def headers(cluster: dict[str, Any], key: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key or cluster['key']}", "X-Engram-Principal": cluster["token"]}


def on_both(cluster: dict[str, Any], calls: list[tuple[str, str, Any]], hdrs: dict[str, str] | None = None,
            extra: list[dict[str, str]] | None = None) -> list[tuple[int, Any]]:
    """Send calls[i] to node i % 2, all at once (a barrier releases them together)."""
    results: list[tuple[int, Any]] = [(0, None)] * len(calls)
    barrier = threading.Barrier(len(calls))

    def send(i: int) -> None:
        node: Server = cluster["nodes"][i % 2]
        method, path, body = calls[i]
        barrier.wait()
        status, payload, _ = node.call(method, path, body, headers={**(hdrs or headers(cluster)),
                                                                    **((extra or [{}] * len(calls))[i])}, timeout=60)
        results[i] = (status, payload)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def query(cluster: dict[str, Any], sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(cluster["url"]) as conn:
        return conn.execute(sql, params or []).fetchall()


def test_one_event_id_sent_to_both_nodes_at_once_makes_one_record(cluster):
    body = memory_body(source={"type": "explicit_user_statement", "event_id": "evt_twin"})

    results = on_both(cluster, [("POST", "/api/v1/memories", body)] * 8)

    assert sorted({s for s, _ in results}) == [200, 201]
    assert [s for s, _ in results].count(201) == 1
    assert len({p["memory_id"] for _, p in results}) == 1
    assert query(cluster, "SELECT count(*) FROM memory_memoryrecord r JOIN memory_event e ON e.id = r.source_event_id "
                          "WHERE e.external_id = 'evt_twin'")[0][0] == 1


def test_writes_of_one_field_on_both_nodes_leave_one_active_head(cluster):
    calls = [("POST", "/api/v1/memories",
              memory_body(fact={"field": "meal", "value": f"meal {i}"}, text=f"Eats meal {i}",
                          source={"type": "explicit_user_statement", "event_id": f"evt_meal_{i}"}))
             for i in range(8)]

    results = on_both(cluster, calls)

    assert {s for s, _ in results} == {201}
    heads = query(cluster, "SELECT id FROM memory_memoryrecord WHERE field = 'meal' AND status = 'active'")
    assert len(heads) == 1
    chain = query(cluster, "SELECT count(*) FROM memory_memoryrecord WHERE field = 'meal' AND status = 'superseded'")
    assert chain[0][0] == 7  # every other write superseded in turn: none lost, none doubled


def test_checkpoint_versions_hold_across_nodes(cluster):
    node = cluster["nodes"][0]
    status, _, response = node.call("PUT", "/api/v1/workflows/wf_multi/checkpoint", {"current_step": "start"},
                                    headers={**headers(cluster), "If-None-Match": "*"})
    assert status == 201
    etag = response.getheader("ETag")
    calls = [("PUT", "/api/v1/workflows/wf_multi/checkpoint", {"current_step": f"step {i}"}) for i in range(6)]

    results = on_both(cluster, calls, extra=[{"If-Match": etag}] * 6)

    statuses = sorted(s for s, _ in results)
    assert statuses.count(200) == 1 and statuses.count(412) == 5  # one writer per version, whichever node


def test_a_deletion_asked_on_both_nodes_is_one_job_that_completes_verified(cluster):
    status, record, _ = cluster["nodes"][0].call(
        "POST", "/api/v1/memories", memory_body(fact={"field": "home_city", "value": "Lisbon"}, text="Lives in Lisbon",
                                                source={"type": "explicit_user_statement", "event_id": "evt_home"}),
        headers=headers(cluster))
    assert status == 201

    results = on_both(cluster, [("DELETE", f"/api/v1/memories/{record['memory_id']}", None)] * 4)

    assert {s for s, _ in results} == {202}
    job_ids = {p["deletion_id"] for _, p in results}
    assert len(job_ids) == 1
    job = job_ids.pop()
    def completed() -> Any:
        status, body, _ = cluster["nodes"][1].call("GET", f"/api/v1/deletions/{job}", headers=headers(cluster))
        assert status == 200, body
        return body if body["status"] == "completed" else None

    done = wait_for(completed, timeout=180, interval=1.0)
    assert {s["status"] for s in done["steps"]} == {"done"}
    assert "Lisbon" not in str(query(cluster, "SELECT fact, text FROM memory_memoryrecord WHERE id = %s",
                                     [record["memory_id"]]))


def test_the_rate_limit_of_a_key_is_shared_by_both_nodes(cluster):
    hdrs = headers(cluster, cluster["limited"])
    # Start early in a one-minute window: past its end the sliding estimate lets a few more through by design.
    if time.time() % 60 > 40:
        time.sleep(60.5 - time.time() % 60)
    statuses = []
    for i in range(RATE + 6):
        status, _, _ = cluster["nodes"][i % 2].call("GET", "/api/v1/memories", headers=hdrs)
        statuses.append(status)

    assert statuses.count(200) == RATE  # not RATE on each node
    assert set(statuses[RATE:]) == {429}
