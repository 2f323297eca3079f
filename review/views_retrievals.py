"""The retrieval inspector: how an operator or reviewer answers "why didn't the agent remember X?".

Lists the recent retrievals of a subject and, for one retrieval, every candidate the pipeline considered
with its lexical and semantic rank, similarity, lexical share, fused relevance and final score, authority,
tokens, and why it was kept or dropped, plus the budget and the stage timings. It reads the retrieval log and,
for the text of a memory candidate, the record itself (a log keeps no copy of it): a record deleted since
reads "(deleted)".

Who may look: reviewers of the log's tenant (the same people who may read the tenant's review queues).
Everything else is a 404 (the same for a missing id and another tenant's), and no session means login.
Texts of records whose class does not list "reviewer" among its allowed readers are masked, as in the queue.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from memory.models import MemoryRecord, Subject
from memory.retrieval.models import RetrievalLog
from memory.retrieval.selectors import with_record_texts
from review.access import reviewer_may_read, reviewer_tenants

RECENT = 50
MASKED = "(hidden: this memory class is not readable by reviewers)"


def _logs_for(request: HttpRequest) -> Any:
    return RetrievalLog.objects.filter(tenant__reviewers=request.user.pk)


@login_required
def retrievals(request: HttpRequest) -> HttpResponse:
    """Subjects with recent retrievals in the viewer's tenants; with ?subject=<id>, that subject's retrievals."""
    tenants = reviewer_tenants(request.user)
    logs = _logs_for(request)
    subject = None
    wanted = request.GET.get("subject", "")
    if wanted:
        subject = Subject.objects.filter(pk=int(wanted) if wanted.isdigit() else 0,
                                         tenant__reviewers=request.user.pk).select_related("tenant").first()
        if subject is None:
            raise Http404("No such subject in your tenants.")
    subjects = (logs.values("subject_id", "subject__external_id", "tenant__slug")
                .annotate(last=Max("created_at"), count=Count("id")).order_by("-last")[:RECENT])
    rows = []
    if subject is not None:
        for log in logs.filter(subject=subject).order_by("-created_at")[:RECENT]:
            rows.append({"log": log, "served": sum(1 for c in log.candidates if c.get("selected")),
                         "considered": len(log.candidates)})
    return render(request, "review/retrievals/index.html",
                  {"is_reviewer": bool(tenants), "subjects": subjects, "subject": subject, "rows": rows})


@login_required
def retrieval_detail(request: HttpRequest, retrieval_id: str) -> HttpResponse:
    log = _logs_for(request).select_related("tenant", "subject").filter(pk=retrieval_id).first()
    if log is None:
        raise Http404("No such retrieval in your tenants.")
    entries = with_record_texts(tenant_id=log.tenant_id, candidates=log.candidates)
    ids = [c["memory_id"] for c in entries if c.get("memory_id")]
    records = {r.pk: r for r in MemoryRecord.objects.filter(pk__in=ids, tenant_id=log.tenant_id)
               .select_related("memory_class").only("id", "source_type", "memory_class")}
    candidates = [_candidate(n, entry, records.get(entry.get("memory_id") or ""))
                  for n, entry in enumerate(entries, start=1)]
    kept = [c for c in candidates if c["selected"]]
    return render(request, "review/retrievals/detail.html", {
        "log": log, "candidates": candidates, "kept": len(kept),
        "limit": log.request.get("limit"), "budget_tokens": log.budget.get("limit"),
        "budget_used": log.budget.get("used"), "include": ", ".join(log.request.get("include") or ["memory"]),
        "timings": log.timings_ms, "dropped": sorted(log.dropped.items()),
    })


def _candidate(position: int, entry: dict[str, Any], record: MemoryRecord | None) -> dict[str, Any]:
    readable = record is None or reviewer_may_read(record.memory_class)
    text = entry.get("text")
    if not readable and text:
        text = MASKED
    elif entry.get("deleted") or entry.get("reason") == "deleted":
        text = "(deleted)"
    return {
        "position": position, "source": entry.get("source", "memory"), "id": entry.get("id"),
        "memory_id": entry.get("memory_id"), "text": text, "masked": not readable,
        "lexical_rank": entry.get("lexical_rank"), "semantic_rank": entry.get("semantic_rank"),
        "similarity": entry.get("similarity"), "lexical": entry.get("lexical"),
        "relevance": entry.get("relevance"), "score": entry.get("score"), "tokens": entry.get("tokens"),
        "authority": entry.get("authority") or (record.source_type if record else None),
        "status": entry.get("status"), "selected": bool(entry.get("selected")),
        "reason": entry.get("reason") or ("kept" if entry.get("selected") else None),
        "namespace": "/".join(entry.get("namespace") or []),
    }
