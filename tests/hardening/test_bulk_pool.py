"""Batch writes are served by `serve`'s bulk pool, at a lower CPU priority than reads, and a batch is never lost
or half-answered when that pool is missing or fails (config/bulk_pool.py)."""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import psutil
import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

from config.bulk_pool import SOCKET_ENV, forwards_bulk_requests
from memory.models import MemoryRecord
from tests.conftest import memory_body, wait_for

BATCH = "/api/v1/memories/batch"


def post(port: int, path: str, headers: dict[str, str], body: bytes, *, chunked: bool = False
         ) -> tuple[int, Any, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent: Any = (body[i:i + 64] for i in range(0, len(body), 64)) if chunked else body
    conn.request("POST", path, body=sent, headers={**headers, "Content-Type": "application/json"},
                 encode_chunked=chunked)
    response = conn.getresponse()
    return response.status, json.loads(response.read()), response


def batch(*event_ids: str) -> bytes:
    return json.dumps({"items": [memory_body(fact={"field": e, "value": e}, text=f"Keeps {e}",
                                             source={"type": "explicit_user_statement", "event_id": e})
                                 for e in event_ids]}).encode()


def bulk_pool_processes() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "gunicorn" in " ".join(process.info["cmdline"] or []) and \
                    process.environ().get("ENGRAM_WEB_POOL") == "bulk":
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.mark.worker
def test_batches_go_to_the_bulk_pool_at_a_lower_priority_and_reads_stay_in_the_main_pool(served, make_agent,
                                                                                          tenant):
    agent = make_agent(tenant, "usr_owner")
    server = served(bulk_workers=1)
    headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token or "",
               "X-Request-ID": "batch-from-this-host-1"}

    # The bulk pool starts beside the main one; until it listens, a batch is served by the main pool.
    status, body, response = wait_for(lambda: (r := post(server.port, BATCH, headers, batch("evt_1")))
                                      and r[2].getheader("X-Engram-Pool") == "bulk" and r, timeout=60)
    assert status == 200 and body["results"][0]["status"] in ("created", "existing")
    # The client's address reached the bulk pool: a request id from this host (trusted) is kept.
    assert response.getheader("X-Request-ID") == "batch-from-this-host-1"
    assert len(response.msg.get_all("Date")) == 1 and len(response.msg.get_all("Server")) == 1

    status, body, response = post(server.port, BATCH, headers, batch("evt_2", "evt_3"), chunked=True)
    assert status == 200 and body["created"] == 2, body
    assert response.getheader("X-Engram-Pool") == "bulk"
    assert MemoryRecord.objects.filter(subject=agent.subject).count() == 3

    status, body, response = post(server.port, BATCH, headers, b'{"items": [')
    assert status == 400 and set(body) == {"code", "detail"}, body  # its errors are the API's own
    assert response.getheader("X-Engram-Pool") == "bulk"

    status, body, response = server.call("POST", "/api/v1/retrieve", {"query": "what does she keep"},
                                         {k: v for k, v in headers.items() if k != "X-Request-ID"})
    assert status == 200 and body["packets"], body
    assert response.getheader("X-Engram-Pool") is None

    workers = [p for p in bulk_pool_processes() if p.parent() is not None and p.parent().environ().get(
        "ENGRAM_WEB_POOL") == "bulk"]
    assert workers and all(p.nice() == settings.ENGRAM_WEB_BULK_NICE for p in workers)
    # ... and its request threads, which inherit it from the process's first thread.
    assert all(psutil.Process(t.id).nice() == settings.ENGRAM_WEB_BULK_NICE for p in workers for t in p.threads())


def wsgi_post(app: Any, path: str, headers: dict[str, str], body: bytes) -> tuple[str, dict[str, str], Any]:
    environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "CONTENT_TYPE": "application/json",
                               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
                               "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "localhost",
                               **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}}
    setup_testing_defaults(environ)
    started: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        started.update(status=status, headers=dict(response_headers))

    content = b"".join(app(environ, start_response))
    return started["status"], started["headers"], json.loads(content)


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_served_by_the_main_pool_when_the_bulk_pool_cannot_be_reached(make_agent, tenant, monkeypatch,
                                                                                  tmp_path: Path):
    agent = make_agent(tenant, "usr_owner")
    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "nobody-listens.sock"))
    app = forwards_bulk_requests(WSGIHandler())

    status, headers, body = wsgi_post(app, BATCH, {"Authorization": f"Bearer {agent.key}",
                                                   "X-Engram-Principal": agent.token or ""}, batch("evt_1"))

    assert status.startswith("200") and body["created"] == 1, body
    assert "X-Engram-Pool" not in headers
    assert MemoryRecord.objects.filter(subject=agent.subject).count() == 1


def test_a_bulk_pool_that_drops_the_batch_gets_503_and_nothing_of_the_request_echoed(monkeypatch, tmp_path: Path):
    path = tmp_path / "drops.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def drop_one() -> None:
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.close()  # a worker killed while it held the request

    threading.Thread(target=drop_one, daemon=True).start()
    monkeypatch.setenv(SOCKET_ENV, str(path))
    secret_key = "eg_live_do-not-echo-this-key"

    status, headers, body = wsgi_post(forwards_bulk_requests(WSGIHandler()), BATCH,
                                      {"Authorization": f"Bearer {secret_key}"}, batch("evt_1"))

    listener.close()
    assert status.startswith("503") and body["code"] == "batch_interrupted", body
    assert headers["Retry-After"] == "1"
    assert secret_key not in json.dumps(body)
