"""Request ids: taken from a trusted proxy (well formed only) or made, returned in X-Request-ID, on Django's log
lines, and carried in the package of every task the request queues. (Through a served process and a real
worker, from the access log to the worker's lines: tests/hardening/test_observability.py.)"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from memory.queues import INTERACTIVE, enqueue
from memory.tracing import TASK_KEY, JsonFormatter, RequestIdFilter, set_request_id
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def lines() -> Iterator[Any]:
    """What the console handler of config/settings.py LOGGING writes (its filter, the JSON formatter), for
    the loggers named, as parsed JSON objects."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter())
    attached: list[logging.Logger] = []

    def read(*names: str) -> list[dict[str, Any]]:
        for name in names:
            log = logging.getLogger(name)
            if log not in attached:
                log.addHandler(handler)
                log.setLevel(logging.INFO)
                attached.append(log)
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    yield read
    for log in attached:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)


def test_it_makes_an_id_for_every_request(client):
    first = client.get("/api/v1/health")["X-Request-ID"]
    second = client.get("/api/v1/health")["X-Request-ID"]

    assert re.fullmatch(r"[0-9a-f]{32}", first) and re.fullmatch(r"[0-9a-f]{32}", second)
    assert first != second


def test_it_keeps_the_id_a_proxy_on_this_host_sent(client):
    response = client.get("/api/v1/health", HTTP_X_REQUEST_ID="lb-7f3a.91_x")

    assert response["X-Request-ID"] == "lb-7f3a.91_x"


def test_it_replaces_an_id_that_could_break_a_log_line(client):
    for bad in ("two words", "x" * 65, "id\u00e9", "a;b", ""):
        response = client.get("/api/v1/health", HTTP_X_REQUEST_ID=bad)

        assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"]), bad


def test_it_ignores_the_id_of_a_client_that_is_not_a_trusted_proxy(client, settings):
    settings.ENGRAM_TRUSTED_PROXIES = ["10.9.0.0/16"]

    untrusted = client.get("/api/v1/health", REMOTE_ADDR="203.0.113.5", HTTP_X_REQUEST_ID="spoofed-1")
    trusted = client.get("/api/v1/health", REMOTE_ADDR="10.9.4.2", HTTP_X_REQUEST_ID="from-proxy-1")

    assert untrusted["X-Request-ID"] != "spoofed-1"
    assert trusted["X-Request-ID"] == "from-proxy-1"


def test_djangos_own_lines_carry_the_id(client, lines):
    lines("django.request")

    response = client.get("/api/v1/no-such-endpoint", HTTP_X_REQUEST_ID="req-404-check")

    assert response.status_code == 404
    logged = [line for line in lines() if line["logger"] == "django.request"]
    assert [(line["request_id"], line["level"]) for line in logged] == [("req-404-check", "WARNING")]
    assert "/api/v1/no-such-endpoint" in logged[0]["message"]
    client.get("/api/v1/no-such-endpoint")
    assert lines()[-1]["request_id"] not in ("req-404-check", "-")


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_by_a_request_carries_its_id(agent):
    """Committed for real: the write's embedding task is queued on commit, inside the request."""
    response = agent.post("/api/v1/memories", memory_body(), headers={"X-Request-ID": "req-write-1"})

    assert response.status_code == 201 and response["X-Request-ID"] == "req-write-1"
    packages = [SignedPackage.loads(row.payload) for row in OrmQ.objects.all()]
    assert [(p["func"], p[TASK_KEY]) for p in packages] == [("memory.records.tasks.embed_records", "req-write-1")]


def test_a_worker_runs_a_task_under_the_id_of_the_request_that_queued_it(lines, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2's worker code, run in this process
    lines("engram.tasks")
    set_request_id("req-task-1")
    try:
        enqueue("memory.records.tasks.embed_pending", queue=INTERACTIVE)
    finally:
        set_request_id(None)

    logged = [(line["request_id"], line["message"]) for line in lines() if line["logger"] == "engram.tasks"]
    assert logged[0] == ("req-task-1", "task memory.records.tasks.embed_pending started on engram")
    assert logged[-1][0] == "req-task-1"
    assert re.fullmatch(r"task memory\.records\.tasks\.embed_pending succeeded in \d+ ms", logged[-1][1])


def test_json_lines_name_their_fields(lines):
    lines("engram.test")
    set_request_id("req-json-1")
    try:
        logging.getLogger("engram.test").warning("hello %s", "there")
    finally:
        set_request_id(None)

    line = lines()[-1]
    assert {k: line[k] for k in ("level", "logger", "message", "request_id")} == {
        "level": "WARNING", "logger": "engram.test", "message": "hello there", "request_id": "req-json-1"}
    assert line["time"].endswith("+00:00") and isinstance(line["process"], int)
