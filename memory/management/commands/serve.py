"""Serve UI + API (gunicorn) together with a django-q2 worker (qcluster); Ctrl-C stops both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--workers", type=int, default=2)

    def handle(self, *args: Any, **options: Any) -> None:
        bind = f"{options['host']}:{options['port']}"
        web = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", bind,
               "--workers", str(options["workers"]), "--threads", "4", "--timeout", "120",
               "--access-logfile", "-"]
        worker = [sys.executable, "manage.py", "qcluster"]
        # Each child leads its own process group: a terminal's Ctrl-C reaches only this command, which
        # then stops each group exactly once (a second signal mid-shutdown leaves qcluster's children behind).
        processes = [subprocess.Popen(web, start_new_session=True), subprocess.Popen(worker, start_new_session=True)]
        self.stdout.write(f"Engram on http://{bind}/ (UI) and http://{bind}/api/v1/ (API), worker running. "
                          "Ctrl-C stops both.")

        stopping = False

        def stop(*_: Any) -> None:
            nonlocal stopping
            if stopping:
                return
            stopping = True
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            # If either process dies, stop the other: a UI without its worker would hide failures.
            while all(p.poll() is None for p in processes):
                time.sleep(0.5)
        finally:
            stop()
            for process in processes:
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
