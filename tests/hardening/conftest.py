"""Real server processes for the hardening tests: `manage.py serve` on the test database, over a socket."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    headers: dict[str, str] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             timeout: float = 30) -> tuple[int, Any, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = json.dumps(body).encode() if body is not None else None
        sent = {**self.headers, **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload
        return response.status, parsed, response


def health(port: int) -> dict | None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/api/v1/health")
        response = conn.getresponse()
        return json.loads(response.read())
    except (OSError, ValueError):
        return None


def launch_serve(env: dict[str, str], *, queues: str = "", web_workers: int = 1, bulk_workers: int = 0,
                 port: int | None = None, log: Path | None = None) -> Server:
    """Start `serve` without waiting for it (several nodes start side by side; see wait_serving). Without its bulk
    pool unless asked: the suite starts many servers, and only tests/hardening/test_bulk_pool.py is about it."""
    port = port or free_port()
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", str(web_workers), "--queues",
         queues, "--bulk-workers", str(bulk_workers)],
        cwd=ROOT, env={**os.environ, "ENGRAM_WARMUP": "0", "ENGRAM_LOG_LEVEL": "WARNING", **env},
        stdout=out, stderr=subprocess.STDOUT)
    return Server(port=port, process=process)


def wait_serving(server: Server, *, need_worker: bool = False) -> Server:
    port = server.port
    wait_for(lambda: (h := health(port)) is not None and (not need_worker or h.get("worker") == "ok"), timeout=90)
    return server


def start_serve(env: dict[str, str], *, queues: str = "", web_workers: int = 1, bulk_workers: int = 0,
                need_worker: bool = False, port: int | None = None, log: Path | None = None) -> Server:
    server = launch_serve(env, queues=queues, web_workers=web_workers, bulk_workers=bulk_workers, port=port, log=log)
    return wait_serving(server, need_worker=need_worker)


def stop_serve(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@pytest.fixture
def served(transactional_db: Any) -> Iterator[Any]:
    """Start `serve` (web only unless queues are given) on the test database; stopped before the flush."""
    from django.db import connection

    started: list[Server] = []

    def start(env: dict[str, str] | None = None, **kwargs: Any) -> Server:  # kwargs: start_serve's
        server = start_serve({"ENGRAM_DB_NAME": connection.settings_dict["NAME"], **(env or {})}, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_serve(server)
