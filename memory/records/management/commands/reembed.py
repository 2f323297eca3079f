"""Rebuild the derived read surfaces of memory records: embeddings and full-text vectors.

Idempotent: by default only records without an embedding are embedded (what a crashed worker or
an import left behind), and the text vectors are recomputed from the record, so a second run
changes nothing. ``--all`` recomputes every embedding (e.g. after changing the model); rows are
overwritten in place, so retrieval never sees a gap.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.management import progress_bar, tenant_by_slug
from memory.models import MemoryRecord
from memory.records.indexing import refresh_search_vectors
from memory.retrieval.embedding import BATCH_SIZE, embed_record_ids, pending_ids


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="Tenant slug (default: every tenant)")
        parser.add_argument("--all", action="store_true", help="Re-embed every record, not only missing ones")
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant_id = tenant_by_slug(options["tenant"]).pk if options["tenant"] else None
        records = MemoryRecord.objects.exclude(status="deleted")
        if tenant_id is not None:
            records = records.filter(tenant_id=tenant_id)
        all_ids = list(records.order_by("pk").values_list("pk", flat=True))
        if options["all"]:
            ids = list(records.filter(memory_class__embed=True).order_by("pk").values_list("pk", flat=True))
        else:
            ids = pending_ids(tenant_id=tenant_id)
        size = max(1, options["batch_size"])
        with progress_bar() as progress:
            task = progress.add_task("text vectors", total=len(all_ids))
            for start in range(0, len(all_ids), 2000):
                chunk = all_ids[start:start + 2000]
                refresh_search_vectors(chunk)
                progress.advance(task, len(chunk))
            task = progress.add_task("embeddings", total=len(ids))
            embedded = embed_record_ids(ids, batch_size=size, only_missing=not options["all"],
                                        progress=lambda n: progress.advance(task, n))
        self.stdout.write(f"text vectors: {len(all_ids)}, embeddings written: {embedded}, "
                          f"still pending: {len(pending_ids(tenant_id=tenant_id))}")
