"""Run the task workers: one django-q2 cluster per queue (urgent, engram, bulk); Ctrl-C stops them all.

For a worker node without a web server. ``--queues urgent`` runs only the deletion queue, e.g. on a node of
its own; every queue needs at least one worker somewhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.metrics import MULTIPROC_ENV
from memory.queues import QUEUES
from memory.workqueues import Supervisor, worker_children


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queues", default=",".join(QUEUES), help="comma-separated queue names")

    def handle(self, *args: Any, **options: Any) -> None:
        queues = tuple(q for q in options["queues"].split(",") if q)
        unknown = sorted(set(queues) - set(QUEUES))
        if unknown or not queues:
            self.stderr.write(f"give one or more of: {', '.join(QUEUES)}")
            sys.exit(2)
        if os.environ.get(MULTIPROC_ENV):
            # Metrics go where the web server of this host (``serve``, started first) reads them.
            Path(os.environ[MULTIPROC_ENV]).mkdir(parents=True, exist_ok=True)
        self.stdout.write(f"workers for {', '.join(queues)}. Ctrl-C stops them.")
        Supervisor(worker_children(queues)).run()
