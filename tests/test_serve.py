"""`manage.py serve` (what `make run` starts): UI + API and a worker together; one Ctrl-C stops both."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queue_of(process: psutil.Process) -> str | None:
    return process.environ().get("Q_CLUSTER_NAME")


def health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=2) as response:
            return json.load(response)
    except OSError:
        return None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_it_serves_the_api_with_a_live_worker_and_stops_everything_on_ctrl_c():
    port = free_port()
    env = {**os.environ, "ENGRAM_DB_NAME": connection.settings_dict["NAME"], "ENGRAM_Q_WORKERS": "1",
           "ENGRAM_WARMUP": "0", "ENGRAM_Q_BULK_WORKERS": "2"}
    process = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "1",
                                "--bulk-workers", "1"],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = wait_for(lambda: (h := health(port)) and h["worker"] == "ok" and h, timeout=60)
        assert body["database"] == "ok"
        children = psutil.Process(process.pid).children(recursive=True)
        assert any("gunicorn" in " ".join(c.cmdline()) for c in children)
        assert any(c.environ().get("ENGRAM_WEB_POOL") == "bulk" for c in children)  # batches' own pool
        # Web and worker processes start with malloc on transparent huge pages (the model's weights).
        assert all("glibc.malloc.hugetlb=1" in c.environ().get("GLIBC_TUNABLES", "") for c in children)
        # The bulk queue's worker processes derive at the lowest priority, the cores shared between them for the
        # model; the deletions' worker does not.
        def bulk_workers() -> list[psutil.Process]:
            return [c for c in psutil.Process(process.pid).children(recursive=True)
                    if queue_of(c) == "bulk" and c.nice() == settings.ENGRAM_Q_BULK_NICE]

        workers = wait_for(lambda: len(found := bulk_workers()) == 2 and found, timeout=30)
        assert {w.environ()["ENGRAM_EMBED_THREADS"] for w in workers} == {str(max(1, (os.cpu_count() or 1) // 2))}
        assert all(c.nice() == 0 for c in psutil.Process(process.pid).children(recursive=True)
                   if queue_of(c) == "urgent")

        process.send_signal(signal.SIGINT)
        process.wait(timeout=40)

        assert psutil.wait_procs(children, timeout=10)[1] == []  # no child left running
        assert health(port) is None
    finally:
        if process.poll() is None:  # a failed assertion: stop the children too (each runs in a session of its own)
            leftovers = psutil.Process(process.pid).children(recursive=True)
            process.kill()
            for child in leftovers:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
