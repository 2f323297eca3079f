"""Writes of the knowledge area: access domains, document ingest (single and batch), deletion.

Ingest order: write permission -> domain the principal may write -> secret scan (before anything
is written) -> content hash (equal to the stored one: a no-op) -> chunking -> embeddings ->
one transaction that swaps the document's chunks.

Embeddings: a document of up to ``ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS`` chunks (default 64, a
few seconds of CPU) is embedded synchronously, *before* the transaction opens (holding row
locks meanwhile would stall other writers of the domain), so its version is complete at commit.
A larger document is stored with NULL embeddings and ``memory.knowledge.tasks.embed_document``
is queued on commit: its chunks are found by the lexical leg at once and by the semantic leg
once the worker has filled them (a request never waits minutes on the model). Either way a
reader sees every chunk of the old version or every chunk of the new one, never a mix: the
swap is one transaction and the provider reads both legs in one statement (one snapshot).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from memory import locks
from memory.audit import audit
from memory.embedder import get_embedder
from memory.errors import EngramError, InvalidInput, NotFound, SecretDetected
from memory.identity.services import subject_get_or_create
from memory.knowledge import chunking
from memory.knowledge.access import readable_domain_ids
from memory.knowledge.formats import to_text
from memory.knowledge.indexing import refresh_chunk_search_vectors
from memory.knowledge.models import AccessDomain, Chunk, Document
from memory.knowledge.secrets import describe, scan_document
from memory.models import Subject, Tenant
from memory.namespaces import NAME
from memory.queues import BULK, enqueue
from memory.scope import WRITE, Scope

MAX_BATCH = 200


def sync_embed_chunks() -> int:
    return int(settings.ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS)


def max_document_chars() -> int:
    return int(settings.ENGRAM_KNOWLEDGE_MAX_DOCUMENT_CHARS)


@dataclass(frozen=True)
class DocumentInput:
    access_domain: str
    external_id: str
    title: str
    text: str
    uri: str = ""
    mime_type: str = "text/plain"
    metadata: dict[str, Any] = field(default_factory=dict)
    fallback_title: str = ""  # used when neither ``title`` nor an HTML <title> gives one


@dataclass
class IngestResult:
    document: Document
    status: str  # "created", "updated" (a new version) or "unchanged"


@dataclass
class BatchItemResult:
    index: int
    external_id: str | None
    result: IngestResult | None = None
    error: EngramError | None = None


@dataclass(frozen=True)
class _Prepared:
    item: DocumentInput
    domain: AccessDomain
    text: str
    title: str
    content_hash: str
    chunks: list[chunking.ChunkSpan]


def operator_scope(tenant: Tenant, actor: str = "cli") -> Scope:
    """The scope of an operator command: the tenant, no subject, write only."""
    return Scope.for_system(actor=actor, tenant_id=tenant.pk, permissions=(WRITE,))


# --- access domains ------------------------------------------------------------------------------
@transaction.atomic
def access_domain_create(*, tenant: Tenant, name: str, description: str = "",
                         subject_external_ids: Sequence[str] = (), reader_kinds: Sequence[str] = (),
                         all_subjects: bool = False, actor: str = "system") -> AccessDomain:
    if not NAME.match(name):
        raise InvalidInput("A domain name is 1-64 lowercase letters, digits, '_', '-' or '.'.", code="invalid_name")
    unknown = sorted(set(reader_kinds) - set(Subject.Kind.values))
    if unknown:
        raise InvalidInput(f"Unknown subject kind(s): {', '.join(unknown)}.")
    if AccessDomain.objects.filter(tenant=tenant, name=name).exists():
        raise InvalidInput(f"Access domain '{name}' already exists.", code="domain_exists", status=409)
    domain = AccessDomain.objects.create(tenant=tenant, name=name, description=description,
                                         all_subjects=all_subjects, reader_kinds=sorted(set(reader_kinds)))
    subjects = [subject_get_or_create(tenant=tenant, external_id=s) for s in subject_external_ids]
    domain.readers.add(*subjects, through_defaults={"tenant_id": tenant.pk})
    audit(actor=actor, action="access_domain.create", object_type="access_domain", object_id=str(domain.pk),
          tenant_id=tenant.pk, data={"name": name, "all_subjects": all_subjects, "readers": len(subjects),
                                     "reader_kinds": domain.reader_kinds})
    return domain


def _writable_domain(scope: Scope, name: str) -> AccessDomain:
    domain = (AccessDomain.objects.filter(tenant_id=scope.tenant_id, name=name)
              .filter(id__in=readable_domain_ids(scope)).first())
    if domain is None:
        # Same answer for "no such domain" and "not yours": no existence oracle.
        raise NotFound(f"No access domain '{name}' for this principal.")
    return domain


def content_hash_of(item: DocumentInput) -> str:
    canonical = {"text": item.text, "title": item.title, "uri": item.uri, "mime_type": item.mime_type,
                 "metadata": item.metadata}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, default=str).encode()).hexdigest()


def _prepare(scope: Scope, item: DocumentInput, domain: AccessDomain | None = None) -> _Prepared:
    """Everything that needs no lock: checks, conversion, secret scan, chunking. Raises EngramError."""
    scope.require(WRITE)
    domain = domain or _writable_domain(scope, item.access_domain)
    if not item.external_id or len(item.external_id) > 200:
        raise InvalidInput("external_id is 1 to 200 characters.")
    if len(item.text) > max_document_chars():
        raise InvalidInput(f"A document's text is at most {max_document_chars()} characters.",
                           code="document_too_large")
    converted = to_text(item.text, item.mime_type)
    title = (item.title.strip() or converted.title.strip() or item.fallback_title.strip())[:500]
    if not title:
        raise InvalidInput("A document needs a title.")
    if not converted.text.strip():
        raise InvalidInput("The document has no text.", code="empty_document")
    spans = scan_document(text=converted.text, fields={"external_id": item.external_id, "title": title,
                                                       "uri": item.uri, "metadata": item.metadata})
    if spans:
        raise SecretDetected(describe(spans), extra={"findings": [s.as_dict() for s in spans]})
    return _Prepared(item=item, domain=domain, text=converted.text, title=title,
                     content_hash=content_hash_of(item), chunks=chunking.split(converted.text))


def _unchanged(prepared: _Prepared) -> Document | None:
    return Document.objects.filter(access_domain=prepared.domain, external_id=prepared.item.external_id,
                                   content_hash=prepared.content_hash).first()


def _lock_document_key(domain_id: int, external_id: str) -> None:
    """Serialise writers of one (domain, external_id).

    Race: two first posts both see no row and both insert, or two re-posts both read version n
    and both write n+1. No row exists to lock on a first post, so take a transaction-scoped
    advisory lock named by the key (released at commit or rollback).
    """
    locks.lock([f"knowledge-document:{domain_id}:{external_id}"])


@transaction.atomic
def _store(*, scope: Scope, prepared: _Prepared, vectors: list[list[float]] | None) -> IngestResult:
    """``vectors`` None: the document is too large to embed in the request; a task does it."""
    item, domain = prepared.item, prepared.domain
    _lock_document_key(domain.pk, item.external_id)
    # FOR UPDATE as well: a concurrent document_delete holds this row's lock; once it commits we
    # see no row and store a fresh document instead of re-saving (resurrecting) the deleted one.
    document = (Document.objects.filter(access_domain=domain, external_id=item.external_id)
                .select_for_update().first())
    if document is not None and document.content_hash == prepared.content_hash:
        return IngestResult(document=document, status="unchanged")  # a concurrent twin stored it first
    now = timezone.now()
    values = {"title": prepared.title, "uri": item.uri, "mime_type": item.mime_type,
              "content_hash": prepared.content_hash, "metadata": item.metadata,
              "char_count": len(prepared.text), "ingested_at": now}
    if document is None:
        status = "created"
        document = Document.objects.create(tenant_id=scope.tenant_id, access_domain=domain,
                                           external_id=item.external_id, version=1, **values)
    else:
        status = "updated"
        for name, value in values.items():
            setattr(document, name, value)
        document.version += 1
        document.save(force_update=True)
        # Old and new chunks never coexist after commit, and nobody sees this delete before it.
        Chunk.objects.filter(document=document).delete()
    pending: list[list[float] | None] = [None] * len(prepared.chunks)
    Chunk.objects.bulk_create([
        Chunk(tenant_id=document.tenant_id, document=document, access_domain=domain, ordinal=c.ordinal, text=c.text,
              char_start=c.char_start, char_end=c.char_end, token_count=c.token_count, embedding=vector)
        for c, vector in zip(prepared.chunks, vectors or pending, strict=True)
    ], batch_size=500)
    refresh_chunk_search_vectors(document_id=document.pk)
    audit(actor=scope.actor, action=f"document.{'ingest' if status == 'created' else 'version'}",
          object_type="document", object_id=str(document.pk), tenant_id=scope.tenant_id,
          subject_id=scope.subject_id or None, data={"access_domain": domain.name, "external_id": item.external_id,
                                             "version": document.version, "chunks": len(prepared.chunks),
                                             "content_hash": prepared.content_hash})
    document_id = document.pk
    if vectors is None:
        transaction.on_commit(lambda: enqueue("memory.knowledge.tasks.embed_document", document_id, queue=BULK))
    return IngestResult(document=document, status=status)


def _embed(chunks: Sequence[chunking.ChunkSpan]) -> list[list[float]]:
    return get_embedder().embed([c.text for c in chunks])


def _embeds_now(prepared: _Prepared) -> bool:
    return len(prepared.chunks) <= sync_embed_chunks()


def document_ingest(*, scope: Scope, item: DocumentInput, domain: AccessDomain | None = None,
                    embed_now: bool | None = None) -> IngestResult:
    """Store a document, a new version of it, or nothing (same content hash). Not atomic itself:
    the embedding runs outside the transaction, and ``_store`` is the one atomic step.

    ``domain`` is for trusted operator callers (manage.py ingest_documents): it skips the
    principal's reader check, which an agent's request always goes through. ``embed_now`` True
    embeds whatever the size (commands, where no HTTP timeout applies)."""
    prepared = _prepare(scope, item, domain)
    existing = _unchanged(prepared)
    if existing is not None:
        return IngestResult(document=existing, status="unchanged")
    now = _embeds_now(prepared) if embed_now is None else embed_now
    vectors = _embed(prepared.chunks) if now else None
    return _store(scope=scope, prepared=prepared, vectors=vectors)


def prepare_only(*, scope: Scope, item: DocumentInput, domain: AccessDomain | None = None) -> int:
    """Every check of an ingest, storing nothing (dry runs); returns the number of chunks."""
    return len(_prepare(scope, item, domain).chunks)


def document_batch_ingest(*, scope: Scope, items: Sequence[DocumentInput | EngramError]) -> list[BatchItemResult]:
    """Up to MAX_BATCH documents; each item succeeds or fails alone (per-item results).

    Items that failed input validation upstream come in as their error. All chunks of the valid
    items are embedded in one model call; each document is then stored in its own transaction.
    """
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"A batch holds at most {MAX_BATCH} documents.", code="batch_too_large")
    scope.require(WRITE)
    results = [BatchItemResult(index=i, external_id=None if isinstance(it, EngramError) else it.external_id)
               for i, it in enumerate(items)]
    domains: dict[str, AccessDomain] = {}
    prepared: list[tuple[int, _Prepared]] = []
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(items):
        if isinstance(item, EngramError):
            results[index].error = item
            continue
        try:
            key = (item.access_domain, item.external_id)
            if key in seen:
                raise InvalidInput("The same external_id appears twice in this batch.", code="duplicate_in_batch")
            seen.add(key)
            if item.access_domain not in domains:
                domains[item.access_domain] = _writable_domain(scope, item.access_domain)
            ready = _prepare(scope, item, domains[item.access_domain])
        except EngramError as exc:
            results[index].error = exc
            continue
        existing = _unchanged(ready)
        if existing is not None:
            results[index].result = IngestResult(document=existing, status="unchanged")
        else:
            prepared.append((index, ready))
    vectors = _embed([c for _, p in prepared if _embeds_now(p) for c in p.chunks])
    offset = 0
    for index, ready in prepared:
        mine: list[list[float]] | None = None
        if _embeds_now(ready):
            mine = vectors[offset: offset + len(ready.chunks)]
            offset += len(ready.chunks)
        try:
            results[index].result = _store(scope=scope, prepared=ready, vectors=mine)
        except (EngramError, IntegrityError) as exc:
            results[index].error = exc if isinstance(exc, EngramError) else InvalidInput(
                "The document could not be stored; retry it.", code="store_failed", status=409)
    return results
