"""A real ``manage.py qcluster`` process for the steps of an in-process run that must be asynchronous.

The scenario phases run their tasks inline (``runner.sync_tasks``: deterministic and quick). The
deletion race also hands queued tasks to a real worker: a separate process, with its own Django, model
and database connections, that takes them from the ORM broker as in production. It is started on the
database this process uses (``ENGRAM_DB_NAME``, which config/settings.py reads), so under pytest it
works on the test database, and it is stopped (SIGTERM, then SIGKILL) when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
STOP_TIMEOUT_S = 20.0


class WorkerError(RuntimeError):
    pass


class Worker:
    def __init__(self, process: subprocess.Popen[bytes], stderr: Any) -> None:
        self.process = process
        self._stderr = stderr

    def wait_for(self, predicate: Callable[[], T], timeout: float) -> T | None:
        """Poll ``predicate`` until it is truthy; None on timeout. A worker that died is an error."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            if self.process.poll() is not None:
                self._stderr.seek(0)
                tail = self._stderr.read()[-600:].decode(errors="replace")
                raise WorkerError(f"qcluster exited early with {self.process.returncode}: {tail}")
            time.sleep(0.25)
        return None


@contextlib.contextmanager
def real_worker() -> Iterator[Worker]:
    from django.conf import settings
    from django.db import connection

    env = {**os.environ, "ENGRAM_DB_NAME": str(connection.settings_dict["NAME"]), "ENGRAM_Q_WORKERS": "1",
           "ENGRAM_Q_SYNC": "false"}
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=settings.BASE_DIR, env=env,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            yield Worker(process, stderr)
        finally:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
