"""Rebuild knowledge chunks' derived columns: full-text vectors, and embeddings (missing ones, or --all).

Ingest fills both; run this after a crash left chunks without embeddings or after changing the
embedding model (--all). Safe to run twice: rows are overwritten in place by id.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.knowledge.indexing import BATCH_SIZE, chunk_ids, embed_chunks, refresh_chunk_search_vectors
from memory.management import progress_bar, tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="Tenant slug (default: every tenant)")
        parser.add_argument("--all", action="store_true", help="Re-embed every chunk, not only missing ones")
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant_id = tenant_by_slug(options["tenant"]).pk if options["tenant"] else None
        vectors = refresh_chunk_search_vectors(tenant_id=tenant_id)
        ids = chunk_ids(tenant_id=tenant_id, only_missing=not options["all"])
        with progress_bar(disable=not self.stdout.isatty()) as progress:
            task = progress.add_task("embeddings", total=len(ids))
            written = embed_chunks(ids, batch_size=max(1, options["batch_size"]),
                                   progress=lambda n: progress.advance(task, n))
        self.stdout.write(f"text vectors: {vectors}, embeddings written: {written}")
