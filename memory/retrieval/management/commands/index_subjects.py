"""Build, refresh or drop large subjects' own search indexes and term statistics now, and compute the centroids
subjects lack (memory/retrieval/centroid.py).

See memory/retrieval/subject_index.py.
The worker does this by itself after writes and every ten minutes; this command does it at once, in the
foreground and without the worker's time limit, e.g. after a bulk import or to prepare a benchmark.
Idempotent: a second run finds nothing to do. Unlike the worker it does not wait for a subject's pending
embeddings (the worker does, so as not to build an HNSW index in the middle of an import): an operator who runs it
wants the indexes now.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.retrieval import centroid
from memory.retrieval.subject_index import maintain, subject_rows, sweep, threshold


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--subject", type=int, action="append", help="subject id (default: every subject due)")

    def handle(self, *args: Any, **options: Any) -> None:
        due = options["subject"] or sweep(wait_for_embeddings=False)
        self.stdout.write(f"{len(due)} subject(s) to maintain (threshold {threshold():,} records)")
        for subject_id in due:
            started = time.perf_counter()
            outcome = maintain(subject_id)
            self.stdout.write(f"subject {subject_id} ({subject_rows(subject_id):,} records): {outcome} "
                              f"in {time.perf_counter() - started:.1f} s")
        self.stdout.write(f"{centroid.refresh_missing()} subject centroid(s) computed")
