"""Metrics and request ids through `manage.py serve` as it runs in production: two gunicorn processes and a
qcluster per queue, each writing its own metrics, which any web process's /metrics adds up; one request id
followed from the HTTP response to the access log and to the worker's lines of the tasks it queued."""

from __future__ import annotations

import json
import re
import shutil
import signal
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import memory_body, wait_for
from tests.hardening.conftest import ROOT
from tests.operations.test_metrics import FAMILIES

EMBED = "memory.records.tasks.embed_records"
DELETE = "memory.deletion.tasks.run_deletion"


def value(text: str, name: str, **labels: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def scrape(server: Any) -> str:
    status, body, response = server.call("GET", "/metrics")
    assert status == 200 and response.getheader("Content-Type").startswith("text/plain")
    return body.decode() if isinstance(body, bytes) else str(body)


def test_metrics_add_up_across_web_and_worker_processes_and_one_id_is_followed_into_the_worker(
        served, make_agent, tenant, tmp_path):
    agent = make_agent(tenant, "usr_owner")
    log = tmp_path / "serve.log"
    server = served({"ENGRAM_LOG_LEVEL": "INFO", "ENGRAM_THROTTLE_ANON_RATE": "2/min"},
                    queues="urgent,engram,bulk", web_workers=2, need_worker=True, log=log)
    server.headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token}
    try:
        status, written, response = server.call("POST", "/api/v1/memories", memory_body(),
                                                headers={"X-Request-ID": "trace-write-1"})
        assert status == 201 and response.getheader("X-Request-ID") == "trace-write-1"
        wait_for(lambda: f"request_id=trace-write-1 task {EMBED} succeeded" in log.read_text(), timeout=90)

        status, accepted, response = server.call("DELETE", f"/api/v1/memories/{written['memory_id']}",
                                                 headers={"X-Request-ID": "trace-delete-1"})
        assert status == 202 and response.getheader("X-Request-ID") == "trace-delete-1"
        wait_for(lambda: server.call("GET", accepted["status_url"])[1]["status"] == "completed", timeout=90)
        wait_for(lambda: f"request_id=trace-delete-1 task {DELETE} succeeded" in log.read_text(), timeout=30)

        guesses = [server.call("GET", "/api/v1/memories", headers={"Authorization": f"Bearer egk_guess{n}"})
                   for n in range(3)]
        assert [g[0] for g in guesses] == [401, 401, 429]

        # Whichever web process answers, it reports every process's counts: the writes and requests of both
        # web processes, the deletion and the tasks counted in the worker processes.
        for _ in range(6):
            text = scrape(server)
            assert value(text, "engram_records_written_total", path="statement") == 1
            assert value(text, "engram_http_request_duration_seconds_count", route="api/v1/memories",
                         method="POST", status="201") == 1
            assert value(text, "engram_http_request_duration_seconds_count", route="api/v1/memories/<str:memory_id>",
                         method="DELETE", status="202") == 1
            assert value(text, "engram_deletion_jobs_total", status="completed") == 1
            assert value(text, "engram_deletion_duration_seconds_count") == 1
            assert value(text, "engram_throttled_requests_total", limit="failed_key") == 1
            assert value(text, "engram_task_duration_seconds_count", queue="engram", task=EMBED,
                         result="succeeded") == 1
            assert value(text, "engram_task_duration_seconds_count", queue="urgent", task=DELETE,
                         result="succeeded") == 1
            assert value(text, "engram_derived_pending", kind="embeddings") == 0
            assert value(text, "engram_embedder_degraded") == 0
            assert [name for name, kind in FAMILIES.items() if f"# TYPE {name} {kind}\n" not in text] == []

        # A web process that dies leaves the live gauges (gunicorn's child_exit); its counts stay in the sums.
        directory = ROOT / "var" / "metrics" / str(server.port)
        web = [p for p in psutil.Process(server.process.pid).children(recursive=True)
               if (directory / f"gauge_livemax_{p.pid}.db").exists() and "gunicorn" in " ".join(p.cmdline())]
        assert len(web) == 2
        web[0].send_signal(signal.SIGKILL)
        wait_for(lambda: not (directory / f"gauge_livemax_{web[0].pid}.db").exists(), timeout=30)
        assert (directory / f"histogram_{web[0].pid}.db").exists()
        assert value(scrape(server), "engram_records_written_total", path="statement") == 1
    finally:
        shutil.rmtree(ROOT / "var" / "metrics" / str(server.port), ignore_errors=True)

    lines = log.read_text().splitlines()
    for request_id, method, queue, task in (("trace-write-1", "POST", "engram", EMBED),
                                            ("trace-delete-1", "DELETE", "urgent", DELETE)):
        access = [line for line in lines if line.endswith(f"request_id={request_id}") and f'"{method} /api/v1/' in line]
        assert len(access) == 1, (request_id, lines)
        worker = [line for line in lines if f"request_id={request_id} task {task}" in line]
        assert [line.split(f"task {task} ")[1].split(" ")[0] for line in worker] == ["started", "succeeded"]
        assert f"started on {queue}" in worker[0]
    # Django's own line for the throttled request carries the id its access line shows.
    throttled = next(line for line in lines if '"GET /api/v1/memories HTTP/1.1" 429' in line)
    request_id = throttled.rsplit("request_id=", 1)[1]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id)
    assert any(f"django.request request_id={request_id} Too Many Requests" in line for line in lines), lines


def test_json_logs_carry_the_id_from_the_access_line_to_the_worker(served, make_agent, tenant, tmp_path):
    agent = make_agent(tenant, "usr_owner")
    log = tmp_path / "serve.log"
    server = served({"ENGRAM_LOG_LEVEL": "INFO", "ENGRAM_LOG_FORMAT": "json"}, queues="urgent", need_worker=True,
                    log=log)
    server.headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token}
    try:
        status, written, _ = server.call("POST", "/api/v1/memories", memory_body())
        assert status == 201
        status, accepted, response = server.call("DELETE", f"/api/v1/memories/{written['memory_id']}",
                                                 headers={"X-Request-ID": "trace-json-1"})
        assert status == 202
        wait_for(lambda: server.call("GET", accepted["status_url"])[1]["status"] == "completed", timeout=90)
        wait_for(lambda: "succeeded" in log.read_text(), timeout=30)
    finally:
        shutil.rmtree(ROOT / "var" / "metrics" / str(server.port), ignore_errors=True)

    objects = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    mine = [o for o in objects if o.get("request_id") == "trace-json-1"]
    access = [o for o in mine if o["logger"] == "gunicorn.access"]
    assert [(o["method"], o["path"], o["status"]) for o in access] == [
        ("DELETE", f"/api/v1/memories/{written['memory_id']}", 202)]
    assert [o["message"].split(" ")[2] for o in mine if o["logger"] == "engram.tasks"] == ["started", "succeeded"]
    assert isinstance(access[0]["duration_ms"], int) and access[0]["remote"] == "127.0.0.1"
    # gunicorn's own lines are JSON objects too.
    assert any(o["logger"] == "gunicorn.error" and "Booting worker" in o["message"] for o in objects)
