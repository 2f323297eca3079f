"""The long-term memory's own purge surfaces and read checks (other areas register theirs).

Order: candidates (10), embeddings (20), full-text vectors (25) -- other areas default to 50 --
audit rows (70), source events (80), the records (85), caches (90), the subject row (95, erasure
only) and the tombstone (99, last). Content-bearing rows go late so a crash midway leaves them
findable by the retry; every purge is a bulk query and idempotent.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Q, TextField
from django.db.models.functions import Cast

from memory.content import TEXT_PREFIX, unseal_evidence
from memory.deletion.export import subject_export
from memory.deletion.models import DeletionJob
from memory.deletion.quoting import contains_marker, forms, may_quote
from memory.deletion.registry import DeletionTarget, purge_surface, read_check
from memory.deletion.services import owner_scope, write_tombstones
from memory.embedder import get_embedder
from memory.errors import EngramError, NotFound
from memory.models import AuditEntry, Candidate, Event, MemoryRecord, RecordStatus, Subject, Tombstone
from memory.records.presenters import record_payload
from memory.records.selectors import memory_history, memory_list
from memory.retrieval.models import RetrievalLog
from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve
from memory.retrieval.selectors import fact_get
from memory.scope import Scope


def _records(target: DeletionTarget) -> Any:
    qs = MemoryRecord.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    return qs if target.whole_subject else qs.filter(pk__in=target.memory_ids)


def _quoting(qs: Any, field: str, markers: tuple[str, ...]) -> Any:
    """Rows whose JSON ``field`` quotes a marker, found in SQL (the text form of the JSON)."""
    if not markers:
        return qs.none()
    match = Q(pk__in=[])
    for marker in forms(markers):
        match |= Q(_json_text__icontains=marker)
    return qs.annotate(_json_text=Cast(field, TextField())).filter(match)


@purge_surface("candidates", order=10)
def purge_candidates(target: DeletionTarget) -> int:
    """Candidates that produced, compete with, or repeat the records, with their evidence copies."""
    qs = Candidate.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    if not target.whole_subject:
        records = list(_records(target).values("pk", "namespace", "field", "content_hash"))
        match = (Q(result_record_id__in=target.memory_ids) | Q(conflict_record_id__in=target.memory_ids)
                 | Q(source_event_id__in=target.event_ids))
        for r in records:
            if r["content_hash"]:
                match |= Q(namespace=r["namespace"], field=r["field"], content_hash=r["content_hash"])
        qs = qs.filter(match)
    # Other candidates' evidence may quote the deleted words (a merge copies evidence): blank those.
    # Sealed quotes (encrypted classes) cannot match in SQL: every candidate holding one is opened here.
    if target.whole_subject:  # every candidate of the subject goes: no other's evidence is left to search
        return qs.delete()[0]
    touched = 0
    subject_candidates = Candidate.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    quoting = (_quoting(subject_candidates, "evidence", (*target.markers, TEXT_PREFIX)) if target.markers
               else subject_candidates.none())
    for c in quoting.exclude(pk__in=qs.values("pk")).only("pk", "evidence"):
        kept = [e for e in c.evidence if not contains_marker(unseal_evidence([e])[0], target.markers)]
        if len(kept) != len(c.evidence):
            Candidate.objects.filter(pk=c.pk).update(evidence=kept)
            touched += 1
    return qs.delete()[0] + touched


@purge_surface("embedding", order=20)
def purge_embeddings(target: DeletionTarget) -> int:
    return (_records(target).filter(Q(embedding__isnull=False) | Q(blended_embedding__isnull=False))
            .update(embedding=None, blended_embedding=None))


@purge_surface("text_index", order=25)
def purge_text_index(target: DeletionTarget) -> int:
    return (_records(target).filter(Q(search_vector__isnull=False) | Q(context_terms__isnull=False))
            .update(search_vector=None, context_terms=None))


@purge_surface("audit", order=70)
def purge_audit(target: DeletionTarget) -> int:
    """Audit rows keep ids and decisions; any value that quotes deleted content goes. An erasure redacts every value
    of the subject's rows but the deletions' own (job and record ids, step names) instead of searching them for each
    of the subject's sentences: one statement however large the subject, where a search for tens of thousands of
    markers in one statement exhausted the database server's memory."""
    if target.whole_subject:
        return AuditEntry.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id).exclude(
            action__startswith="deletion.").exclude(data={}).update(data={"redacted": True})
    if not target.markers:
        return 0
    touched = 0
    rows = AuditEntry.objects.filter(tenant_id=target.tenant_id).filter(
        Q(subject_id=target.subject_id) | Q(object_id__in=target.memory_ids))
    for row in _quoting(rows, "data", target.markers).only("pk", "data"):
        if isinstance(row.data, dict) and contains_marker(row.data, target.markers):
            clean = {k: v for k, v in row.data.items() if not contains_marker(v, target.markers)}
            AuditEntry.objects.filter(pk=row.pk).update(data={**clean, "redacted": True})
            touched += 1
    return touched


@purge_surface("events", order=80)
def purge_events(target: DeletionTarget) -> int:
    """The source events (memory.Event) of the records: the words the user said go with the record."""
    qs = Event.objects.filter(tenant_id=target.tenant_id, subject_id=target.subject_id)
    if not target.whole_subject:
        qs = qs.filter(pk__in=target.event_ids)
    return qs.delete()[0]


@purge_surface("records", order=85)
def purge_records(target: DeletionTarget) -> int:
    """A deleted record keeps its id, key and status and no content (contract: deleted rows keep no
    content). An erasure removes the rows outright."""
    if target.whole_subject:
        return _records(target).delete()[0]
    return _records(target).update(status=RecordStatus.DELETED, status_reason="deleted", fact={}, text="",
                                   content_hash="", source_ref=None, embedding=None, blended_embedding=None,
                                   search_vector=None, context_terms=None)


@purge_surface("caches", order=90)
def purge_caches(target: DeletionTarget) -> int:
    """The only cache that can hold the deleted words: the query-embedding LRU of this process (it
    keys on query text, which may quote them). Nothing caches records, packets or pages in the
    shared cache backend (it holds only the worker's heartbeat), so there is nothing to clear there."""
    get_embedder().clear_query_cache()
    return 1


@purge_surface("subject", order=95)
def purge_subject(target: DeletionTarget) -> int:
    """Erasure only: the Subject row itself goes (cascading whatever rows other areas left)."""
    if not target.whole_subject:
        return 0
    return Subject.objects.filter(pk=target.subject_id, tenant_id=target.tenant_id).delete()[0]


@purge_surface("tombstone", order=99)
def ensure_tombstones(target: DeletionTarget) -> int:
    """The tombstones were written when the job was planned; this step proves they are there."""
    if not target.memory_ids:
        return 0
    present = set(Tombstone.objects.filter(tenant_id=target.tenant_id, memory_id__in=target.memory_ids)
                  .values_list("memory_id", flat=True))
    for memory_id in sorted(set(target.memory_ids) - present):
        # Re-plant from the job plan (keyed hashes only) if someone removed them (a batch has several plans).
        job = DeletionJob.objects.filter(tenant_id=target.tenant_id, plan__memory_ids__contains=[memory_id]).first()
        if job is None:
            raise RuntimeError("tombstones missing and no plan to rebuild them from")
        write_tombstones(tenant_id=target.tenant_id, subject_hash_value=job.subject_hash,
                          items=job.plan.get("tombstones", []))
    return len(present)


# --- read checks: the read surfaces as the owning principal ------------------------------------------


def _scope(target: DeletionTarget) -> Scope:
    return owner_scope(tenant_id=target.tenant_id, subject_id=target.subject_id,
                       subject_external_id=target.subject_external_id)


def _payload_hits(payloads: list[dict[str, Any]], markers: tuple[str, ...],
                  restated: frozenset[str] = frozenset()) -> list[str]:
    return [str(p.get("memory_id", "?")) for p in payloads if p.get("memory_id") not in restated
            and contains_marker({k: p.get(k) for k in ("fact", "text", "provenance")}, markers)]


def _restated(target: DeletionTarget) -> frozenset[str]:
    """Records stated anew after the deletion was requested (their source event is newer than the request):
    the person said it again. A record that a delayed job rebuilt from old content has an old source event
    and is still caught."""
    if target.requested_at is None or target.whole_subject:
        return frozenset()
    return frozenset(MemoryRecord.objects.filter(
        tenant_id=target.tenant_id, subject_id=target.subject_id, source_event__created_at__gt=target.requested_at,
    ).exclude(pk__in=target.memory_ids).values_list("pk", flat=True))


@read_check("memory.detail")
def check_detail(target: DeletionTarget) -> list[str]:
    records = memory_list(scope=_scope(target)).filter(pk__in=target.memory_ids)
    hits = [r.pk for r in records if r.status != RecordStatus.DELETED]
    hits += _payload_hits([dict(record_payload(r)) for r in records], target.markers)
    return sorted(set(hits))


@read_check("memory.list")
def check_list(target: DeletionTarget) -> list[str]:
    """The subject's list as the API serves it, page by page: only the records that could quote a marker are read
    (memory/deletion/quoting.py), so a subject's size does not set the check's cost."""
    records = may_quote(memory_list(scope=_scope(target)), target.markers, text=("text",), json_fields=("fact",))
    return _payload_hits([dict(record_payload(r)) for r in records], target.markers, _restated(target))


@read_check("memory.history")
def check_history(target: DeletionTarget) -> list[str]:
    hits: list[str] = []
    # Only the records still there have a history to read (an erasure's are gone: one query, not one per record).
    for memory_id in MemoryRecord.objects.filter(tenant_id=target.tenant_id, pk__in=target.memory_ids).values_list(
            "pk", flat=True):
        try:
            chain = memory_history(scope=_scope(target), memory_id=memory_id)
        except NotFound:
            continue
        hits += _payload_hits([dict(record_payload(r)) for r in chain], target.markers)
    return hits


# The export check reads every section but two, left to their own checks (memory/retrieval/deletion_surfaces.py),
# because reading them here would make each deletion cost as much as the subject's history or size. The retrieval
# logs: the export shows a log's memory entries with their records' current text, so what it could still quote of
# a deleted record is the query and provider entries their indexed check covers. The context windows: exported as
# record ids and a hash (their words and vectors are derived columns, left out of every export), one per turn.
_EXPORT_UNCHECKED = frozenset({"retrieval_logs", "retrieval.recordcontext"})


# What of an exported record, event or candidate is its content: a marker found in the rest (a status, a namespace,
# an event id the client chose) is a coincidence of words, not the deleted content ("active", "travel").
_CONTENT = {
    "records": lambda r: [r.get("fact"), r.get("text"), (r.get("provenance") or {}).get("text"),
                          (r.get("source") or {}).get("reference")],
    "events": lambda e: [e.get("text")],
    "candidates": lambda c: [c.get("fact"), c.get("text"), c.get("evidence")],
}


@read_check("export")
def check_export(target: DeletionTarget) -> list[str]:
    """The subject's export, with only the records and events that could quote a marker read (quoting.py)."""
    body = subject_export(scope=_scope(target), leave_out=_EXPORT_UNCHECKED, quoting=target.markers)
    restated = _restated(target)
    body["records"] = [r for r in body.get("records", []) if r.get("memory_id") not in restated]
    if target.requested_at is not None and not target.whole_subject:
        body["events"] = [e for e in body.get("events", []) if e.get("created_at") is None
                          or e["created_at"] <= target.requested_at]
    for section, content in _CONTENT.items():
        body[section] = [content(row) for row in body.get(section, [])]
    return [section for section, rows in body.items()
            if isinstance(rows, list) and rows and contains_marker(rows, target.markers)]


@read_check("facts")
def check_facts(target: DeletionTarget) -> list[str]:
    """The exact-fact read (GET /facts) of each deleted record's key must not serve the content."""
    hits: list[str] = []
    keys = set(MemoryRecord.objects.filter(pk__in=target.memory_ids).values_list("namespace", "field"))
    for namespace, field in keys:
        try:
            record = fact_get(scope=_scope(target), namespace=namespace, field=field)
        except EngramError:
            continue
        hits += _payload_hits([dict(record_payload(record))], target.markers, _restated(target))
    return hits


@read_check("retrieve")
def check_retrieve(target: DeletionTarget) -> list[str]:
    """Retrieve with each deleted sentence as the query: no packet may serve a marker or a deleted id.

    The check's own retrieval log and cached query embedding would quote the marker, so both go
    before the check returns."""
    queries = sorted({m for m in target.markers if len(m) >= 8})[:5] or list(target.markers[:1])
    restated = _restated(target)
    hits: list[str] = []
    for query in queries:
        result = memory_retrieve(scope=_scope(target), request=RetrieveRequest(query=query, limit=20))
        RetrievalLog.objects.filter(pk=result.retrieval_id).delete()
        for packet in result.packets:
            if packet.get("memory_id") in restated:
                continue
            if packet.get("memory_id") in target.memory_ids or contains_marker(packet, target.markers):
                hits.append(str(packet.get("memory_id") or packet.get("id") or "packet"))
    get_embedder().clear_query_cache()
    return sorted(set(hits))


_DIGEST = re.compile(r"[0-9a-f]{64}")


@read_check("tombstone")
def check_tombstone(target: DeletionTarget) -> list[str]:
    """Tombstones exist for every deleted record and hold no plaintext: their content and event hashes are keyed
    digests (memory/tombstones.py) or empty, which no sentence can be; proved row by row, not by searching each
    row for every marker (an erasure's are every sentence of the subject)."""
    rows = list(Tombstone.objects.filter(tenant_id=target.tenant_id, memory_id__in=target.memory_ids)
                .values("memory_id", "content_hash", "event_hashes", "namespace", "field"))
    missing = set(target.memory_ids) - {r["memory_id"] for r in rows}
    leaks = [r["memory_id"] for r in rows
             if not all(_DIGEST.fullmatch(h) for h in [r["content_hash"] or "0" * 64, *(r["event_hashes"] or [])])]
    return [f"missing {m}" for m in sorted(missing)] + leaks
