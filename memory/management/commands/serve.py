"""Serve UI + API (gunicorn) together with the workers of every queue (one qcluster each); Ctrl-C stops all."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from config.bulk_pool import POOL_ENV, SOCKET_ENV, socket_path
from memory.metrics import MULTIPROC_ENV
from memory.queues import QUEUES
from memory.workqueues import BASE_DIR, Child, Supervisor, malloc_env, metrics_dir, thread_env, worker_children

GUNICORN = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "-c", "python:config.gunicorn",
            "--timeout", "120"]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--workers", type=int, default=int(os.environ.get("ENGRAM_WEB_WORKERS", 2)),
                            help="gunicorn worker processes (each runs --threads request threads)")
        parser.add_argument("--threads", type=int, default=int(os.environ.get("ENGRAM_WEB_THREADS", 4)))
        parser.add_argument("--bulk-workers", type=int, default=int(os.environ.get("ENGRAM_BULK_WEB_WORKERS", 2)),
                            help="gunicorn worker processes that serve batch writes at a lower CPU priority "
                                 "(config/bulk_pool.py); 0: the web processes serve them")
        parser.add_argument("--queues", default=",".join(QUEUES),
                            help="queues to run workers for on this node (comma-separated; empty: none)")

    def handle(self, *args: Any, **options: Any) -> None:
        bind = f"{options['host']}:{options['port']}"
        os.environ[MULTIPROC_ENV] = str(metrics_dir(options["port"]))
        web = Child(name="web", argv=[
            *GUNICORN, "--bind", bind, "--workers", str(options["workers"]), "--threads", str(options["threads"]),
            "--access-logfile", "-", "--forwarded-allow-ips", os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
        ], env={**thread_env(1), **malloc_env()})  # one model thread per web process: one query at a time
        pools = [web]
        if options["bulk_workers"] > 0:
            path = socket_path(options["port"], BASE_DIR)
            web.env[SOCKET_ENV] = str(path)
            # Its access lines are the main pool's: every request it serves came through there.
            pools.append(Child(name="web:bulk", argv=[
                *GUNICORN, "--bind", f"unix:{path}", "--workers", str(options["bulk_workers"]), "--threads", "2",
            ], env={POOL_ENV: "bulk", **thread_env(1), **malloc_env()}))
        queues = tuple(q for q in options["queues"].split(",") if q)
        unknown = sorted(set(queues) - set(QUEUES))
        if unknown:
            self.stderr.write(f"unknown queue(s): {', '.join(unknown)}; known: {', '.join(QUEUES)}")
            sys.exit(2)
        supervisor = Supervisor([*pools, *worker_children(queues)])
        self.stdout.write(f"Engram on http://{bind}/ (UI) and http://{bind}/api/v1/ (API), "
                          f"workers for {', '.join(queues) or 'no queue'}. Ctrl-C stops all.")
        supervisor.run()
