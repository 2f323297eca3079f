"""How much derived work is still to be done: the caught-up signal behind health's ``derived_pending``.

Every derived surface is counted where its pending state is recorded, so the figure reaches zero only when
retrieval sees everything written: records waiting for their embedding, episodic records waiting for their
context windows (retrieval.PendingContext), large subjects whose own indexes or term statistics are due
(retrieval.PendingMaintenance, marked when their maintenance is queued, so no call counts every subject's
records), server summaries that went stale and wait to be regenerated (or new ones waiting for their embedding),
and knowledge chunks waiting for theirs.
"""

from __future__ import annotations

from django.db.models import Q

from memory.knowledge.models import Chunk
from memory.retrieval.models import PendingContext
from memory.retrieval.pending import pending_records
from memory.retrieval.subject_index import pending_maintenance
from memory.threads.models import Summary

KINDS = ("embeddings", "context_windows", "subject_indexes", "summaries", "knowledge_chunks")

def _summaries_to_regenerate() -> int:
    # Stale server summaries wait for their regeneration; fresh ones with text wait for their embedding.
    stale = Q(status=Summary.Status.STALE, origin=Summary.Origin.SERVER, replaced_by__isnull=True)
    unembedded = Q(status=Summary.Status.FRESH, embedding__isnull=True) & ~Q(text="")
    return Summary.objects.filter(stale | unembedded).count()


def _chunks_to_embed() -> int:
    return Chunk.objects.filter(embedding__isnull=True).count()


def derived_pending_by_kind() -> dict[str, int]:
    return {
        "embeddings": pending_records().count(),
        "context_windows": PendingContext.objects.count(),
        "subject_indexes": pending_maintenance(),
        "summaries": _summaries_to_regenerate(),
        "knowledge_chunks": _chunks_to_embed(),
    }
