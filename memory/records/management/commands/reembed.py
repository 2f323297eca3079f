"""Rebuild the derived read surfaces of memory records: full-text vectors, embeddings and context windows.

Idempotent: by default only records without an embedding are embedded (what a crashed worker or
an import left behind), the text vectors are recomputed from the record, every episodic record's
context window is recomputed and written only where it changed, and large subjects' term statistics
are recomputed from the result, as are the centroids of subjects that have none (centroid.py), so a second run
changes nothing.
``--all`` recomputes every embedding, every window and every centroid (e.g. after changing the model); rows are
overwritten in place, so retrieval never sees a gap.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.management import progress_bar, tenant_by_slug
from memory.models import MemoryRecord
from memory.records.indexing import refresh_search_vectors
from memory.retrieval.centroid import missing, refresh
from memory.retrieval.context import refresh_context
from memory.retrieval.embedding import BATCH_SIZE, embed_record_ids, pending_ids
from memory.retrieval.models import RecordContext, SubjectIndex
from memory.retrieval.subject_index import refresh_statistics


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
                refresh_search_vectors(chunk, episodic=False)  # the windows are rebuilt below, here
                progress.advance(task, len(chunk))
            task = progress.add_task("embeddings", total=len(ids))
            embedded = embed_record_ids(ids, batch_size=size, only_missing=not options["all"],
                                        progress=lambda n: progress.advance(task, n))
            episodic = list(records.filter(memory_type="episodic", status="active").order_by("pk")
                            .values_list("pk", flat=True))
            if options["all"]:
                contexts = RecordContext.objects.all()
                if tenant_id is not None:
                    contexts = contexts.filter(tenant_id=tenant_id)
                contexts.update(window_hash="")  # recompute every window, in place
            task = progress.add_task("context windows", total=len(episodic))
            windows = 0
            for start in range(0, len(episodic), size):
                chunk = episodic[start:start + size]
                windows += refresh_context(chunk)
                progress.advance(task, len(chunk))
            # A large subject's term statistics count the words just recomputed.
            indexed = SubjectIndex.objects.all() if tenant_id is None else SubjectIndex.objects.filter(
                tenant_id=tenant_id)
            refreshed = sum(refresh_statistics(s) for s in indexed.values_list("subject_id", flat=True))
            # Centroids follow their subjects' counts, which new vectors for the same records leave as they were.
            subjects = sorted(set(records.values_list("subject_id", flat=True))) if options["all"] else missing()
            task = progress.add_task("centroids", total=len(subjects))
            for subject_id in subjects:
                refresh(subject_id)
                progress.advance(task)
        self.stdout.write(f"text vectors: {len(all_ids)}, embeddings written: {embedded}, "
                          f"context windows written: {windows}, term statistics refreshed: {refreshed}, "
                          f"centroids: {len(subjects)}, "
                          f"still pending: {len(pending_ids(tenant_id=tenant_id))}")
