"""Where a deleted document's content lives, for the deletion job (``DeletionTarget.document_ids``).

Surfaces, in order: retrieval logs (every subject's log entries that quote the document's chunks:
knowledge is shared, so any reader may have been served it), chunks (their text, embedding and
full-text vector are columns of one row, so one delete clears the text index and the vector index
too) and the document row. Nothing caches knowledge results, so there is no cache to purge. Every
surface is idempotent and a no-op for targets without document ids.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory.deletion.registry import DeletionTarget, job_kind, purge_surface, read_check
from memory.knowledge.models import Chunk, Document
from memory.retrieval.models import RetrievalLog

# A document's deletion job (memory/knowledge/deletion.py) walks these surfaces and read checks only, through the
# shared runner; registered here, at app load, so that a worker resuming such a job knows it too.
DOCUMENT_KIND = "document"
SURFACE_PREFIX = "knowledge_"
job_kind(DOCUMENT_KIND, prefix=SURFACE_PREFIX)


def _prefixes(target: DeletionTarget) -> tuple[str, ...]:
    return tuple(f"doc:{d}:" for d in target.document_ids)


def _quotes(entry: dict[str, Any], prefixes: tuple[str, ...]) -> bool:
    return entry.get("source") == "knowledge" and str(entry.get("id", "")).startswith(prefixes)


def _logs(target: DeletionTarget) -> Any:
    return RetrievalLog.objects.filter(tenant_id=target.tenant_id, candidates__contains=[{"source": "knowledge"}])


@purge_surface("knowledge_retrieval_logs", order=25)
@transaction.atomic
def purge_knowledge_retrieval_logs(target: DeletionTarget) -> int:
    if not target.document_ids:
        return 0
    prefixes = _prefixes(target)
    touched = []
    for log in _logs(target).select_for_update().only("id", "candidates"):
        kept = [e for e in log.candidates if not _quotes(e, prefixes)]
        if len(kept) != len(log.candidates):
            log.candidates = kept
            touched.append(log)
    RetrievalLog.objects.bulk_update(touched, ["candidates"])
    return len(touched)


@purge_surface("knowledge_chunks", order=40)
def purge_knowledge_chunks(target: DeletionTarget) -> int:
    """Chunk rows: text, embedding (vector index) and search_vector (GIN text index) in one delete."""
    if not target.document_ids:
        return 0
    deleted, _ = Chunk.objects.filter(document__tenant_id=target.tenant_id,
                                      document_id__in=target.document_ids).delete()
    return deleted


@purge_surface("knowledge_document", order=45)
def purge_knowledge_document(target: DeletionTarget) -> int:
    if not target.document_ids:
        return 0
    deleted, _ = Document.objects.filter(tenant_id=target.tenant_id, pk__in=target.document_ids).delete()
    return deleted


@read_check("knowledge_rows")
def check_knowledge_rows(target: DeletionTarget) -> list[str]:
    if not target.document_ids:
        return []
    found = [f"document {pk}" for pk in
             Document.objects.filter(pk__in=target.document_ids).values_list("pk", flat=True)]
    found += [f"chunk {pk} (text, embedding, search vector)" for pk in
              Chunk.objects.filter(document_id__in=target.document_ids).values_list("pk", flat=True)[:20]]
    return found


@read_check("knowledge_retrieval_logs")
def check_knowledge_retrieval_logs(target: DeletionTarget) -> list[str]:
    if not target.document_ids:
        return []
    prefixes = _prefixes(target)
    return [f"retrieval log {log.pk}" for log in _logs(target).only("id", "candidates")
            if any(_quotes(e, prefixes) for e in log.candidates)]
