"""Reads of the retrieval area: logs (per subject, as the reader's grant shows them) and exact facts."""

from __future__ import annotations

from typing import Any

from memory.content import unseal
from memory.errors import Conflict as ConflictError
from memory.errors import NotFound
from memory.models import Confidence, Conflict, MemoryRecord, RecordStatus
from memory.policy.classes import readable_by
from memory.policy.precedence import rank
from memory.retrieval.models import RetrievalLog
from memory.scope import KNOWLEDGE, READ, THREADS, Scope

# Logs written before each entry named its grant: the source decides (procedures need none).
_SOURCE_GRANTS = {"summaries": THREADS, "knowledge": KNOWLEDGE, "procedures": None}


def retrieval_log_get(*, scope: Scope, retrieval_id: str) -> RetrievalLog:
    """A log is its subject's: another subject or tenant gets the same 404 as a missing id. A reader
    whose grant is narrower than the writer's sees only the entries it may see (``visible_log_fields``)."""
    scope.require(READ)
    log = RetrievalLog.objects.filter(pk=retrieval_id, tenant_id=scope.tenant_id, subject_id=scope.subject_id).first()
    if log is None:
        raise NotFound(f"No retrieval '{retrieval_id}' for this principal.")
    return visible_log(scope, log)


def visible_log(scope: Scope, log: RetrievalLog) -> RetrievalLog:
    """The log as ``scope`` may see it (not saved): see ``visible_log_fields``; memory entries carry the text
    of their record as it reads now (``with_record_texts``)."""
    shown = visible_log_fields(scope, {"query": log.query, "request": log.request, "candidates": log.candidates})
    log.query, log.request = shown["query"], shown["request"]
    log.candidates = with_record_texts(tenant_id=log.tenant_id, candidates=shown["candidates"])
    if scope.reader_role != "agent":
        log.candidates = _masked_for_reader(scope, log.candidates)
    return log


MASKED = "(hidden: this memory class is not readable by reviewers)"


def _masked_for_reader(scope: Scope, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A person reading a log (a reviewer) reads an entry's words only where the record's class lists
    their role among its allowed readers, as in the review queue; each memory entry also says whether it
    was masked and, when the log did not say, its record's authority."""
    ids = [e["memory_id"] for e in candidates if e.get("memory_id")]
    records = {r.pk: r for r in MemoryRecord.objects.filter(pk__in=ids, tenant_id=scope.tenant_id)
               .select_related("memory_class").only("id", "source_type", "memory_class")}
    shown = []
    for entry in candidates:
        record = records.get(entry.get("memory_id") or "")
        readable = record is None or (record.memory_class is not None
                                      and readable_by(record.memory_class, scope.reader_role))
        entry = {**entry, "masked": not readable}
        if not readable and entry.get("text"):
            entry["text"] = MASKED
        if record is not None and not entry.get("authority"):
            entry["authority"] = record.source_type
        shown.append(entry)
    return shown


def with_record_texts(*, tenant_id: int, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A log's entries with each memory entry's ``text`` read from its record, in one query.

    A log keeps ids, ranks, scores and reasons of memory candidates, never their text: the text shown is the
    record's own while it exists, and a deleted record's entry says ``"deleted": true`` with no text. So
    deleting a record needs nothing from the logs that merely ranked it (memory/retrieval/deletion_surfaces.py).
    """
    return logs_with_record_texts(tenant_id=tenant_id, logs=[candidates])[0]


def logs_with_record_texts(*, tenant_id: int, logs: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """``with_record_texts`` for many logs' entries, in one query."""
    ids = {str(e["memory_id"]) for entries in logs for e in entries or [] if isinstance(e, dict) and e.get("memory_id")}
    texts: dict[str, str] = {}
    if ids:
        texts = {r.pk: unseal(r)[1] for r in MemoryRecord.objects.filter(pk__in=ids, tenant_id=tenant_id).exclude(
            status=RecordStatus.DELETED).only("id", "fact", "text")}
    shown_logs = []
    for entries in logs:
        shown = []
        for entry in entries or []:
            memory_id = entry.get("memory_id") if isinstance(entry, dict) else None
            if memory_id:
                entry = {k: v for k, v in entry.items() if k != "text"}
                if memory_id in texts:
                    entry["text"] = texts[memory_id]
                else:
                    entry["deleted"] = True
            shown.append(entry)
        shown_logs.append(shown)
    return shown_logs


def visible_log_fields(scope: Scope, fields: dict[str, Any]) -> dict[str, Any]:
    """A log's ``query``, ``request`` and ``candidates`` as ``scope`` may see them: the log may have been
    written by a wider key of the subject. Candidates outside the grant are left out, the request's
    namespaces narrowed to it, and the writer's own words (the query, and the namespaces it asked for
    in vain, which may name what the reader may not see) are shown only when the reader's grant covers
    the writer's (``request.grant``)."""
    if scope.unrestricted:
        return fields
    request = fields["request"] if isinstance(fields["request"], dict) else {}
    writer = request.get("grant")
    covered = isinstance(writer, list) and all(isinstance(p, str) and scope.allows_namespace(p) for p in writer)
    namespaces = request.get("namespaces")
    if isinstance(namespaces, list):
        request = {**request, "namespaces": [n for n in namespaces if isinstance(n, str) and scope.allows_namespace(n)]}
    if not covered:  # the writer's grant names namespaces the reader may not know of
        request = {k: v for k, v in request.items() if k != "grant"}
    candidates = [e for e in fields["candidates"] or [] if isinstance(e, dict) and _may_see(scope, e, covered)]
    return {**fields, "query": fields["query"] if covered else "", "request": request, "candidates": candidates}


def _may_see(scope: Scope, entry: dict[str, Any], covered: bool) -> bool:
    if entry.get("reason") == "out_of_scope":  # a namespace the writer asked for and could not reach
        return covered
    if entry.get("source", "memory") == "memory":
        namespace = entry.get("namespace")
        grant: str | None = "/".join(namespace) if isinstance(namespace, list) else ""
    elif "grant" in entry:
        grant = entry["grant"]
    else:
        grant = _SOURCE_GRANTS.get(str(entry.get("source")), "")
    return grant is None or scope.allows_namespace(str(grant))


class FactConflict(ConflictError):
    """409 conflict; the view lists ``records`` in the contract's record shape."""

    def __init__(self, detail: str, records: list[MemoryRecord]) -> None:
        super().__init__(detail, code="conflict")
        self.records = records


def fact_get(*, scope: Scope, namespace: str, field: str) -> MemoryRecord:
    """The single active confirmed record for (namespace, field), chosen by precedence.

    Writes keep one active head per key, except where policy cannot decide (a stored open Conflict):
    then 409 ``conflict`` names the competing records. Candidates are never exact facts.
    """
    scope.require(READ)
    heads = list(MemoryRecord.objects.for_scope(scope).live()
                 .filter(namespace=namespace, field=field, confidence=Confidence.CONFIRMED)
                 .select_related("memory_class", "source_event", "subject").order_by("-created_at", "-pk"))
    if not heads:
        raise NotFound(f"No active fact '{field}' in namespace '{namespace}' for this principal.")
    if len(heads) == 1:
        return heads[0]
    best = min(rank(h.source_type) for h in heads)
    strongest = [h for h in heads if rank(h.source_type) == best]
    in_conflict = set(Conflict.records.through.objects.filter(
        memoryrecord_id__in=[h.pk for h in strongest], conflict__status=Conflict.Status.OPEN,
    ).values_list("memoryrecord_id", flat=True))
    if len(strongest) > 1 and in_conflict:
        raise FactConflict(f"Policy cannot decide between {len(strongest)} records for '{field}'.", strongest)
    return strongest[0]  # newest of the highest authority
