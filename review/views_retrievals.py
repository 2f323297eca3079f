"""The retrieval inspector: how an operator or reviewer answers "why didn't the agent remember X?".

Lists the recent retrievals of a subject and, for one retrieval, every candidate the pipeline considered
with its lexical and semantic rank, similarity, lexical share, fused relevance and final score, authority,
tokens, and why it was kept or dropped, plus the budget and the stage timings. It reads the retrieval log and,
for the text of a memory candidate, the record itself (a log keeps no copy of it): a record deleted since
reads "(deleted)".

Who may look: reviewers of the log's tenant (the same people who may read the tenant's review queues).
Everything else is a 404 (the same for a missing id and another tenant's), and no session means login.
Texts of records whose class does not list "reviewer" among its allowed readers are masked, as in the queue:
the log is read through the same selector as an agent's, with the reviewer's scope (memory/identity/access.py).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory.identity.access import access_retrieval_log, access_reviewed_subject, reviewer_of
from memory.retrieval.models import RetrievalLog

RECENT = 50


@login_required
def retrievals(request: HttpRequest) -> HttpResponse:
    """Subjects with recent retrievals in the viewer's tenants; with ?subject=<id>, that subject's retrievals."""
    reviewer = reviewer_of(request.user)
    logs = RetrievalLog.objects.filter(tenant_id__in=reviewer.tenant_ids)
    subject = None
    wanted = request.GET.get("subject", "")
    if wanted:
        subject = access_reviewed_subject(reviewer, wanted)
    subjects = (logs.values("subject_id", "subject__external_id", "subject__display_name", "tenant__slug")
                .annotate(last=Max("created_at"), count=Count("id")).order_by("-last")[:RECENT])
    rows = []
    if subject is not None:
        for log in logs.filter(subject=subject).order_by("-created_at")[:RECENT]:
            rows.append({"log": log, "served": sum(1 for c in log.candidates if c.get("selected")),
                         "considered": len(log.candidates)})
    return render(request, "review/retrievals/index.html",
                  {"is_reviewer": reviewer.reviews_any, "subjects": subjects, "subject": subject, "rows": rows})


@login_required
def retrieval_detail(request: HttpRequest, retrieval_id: str) -> HttpResponse:
    log = access_retrieval_log(reviewer_of(request.user), retrieval_id)
    candidates = [_candidate(n, entry) for n, entry in enumerate(log.candidates, start=1)]
    kept = [c for c in candidates if c["selected"]]
    return render(request, "review/retrievals/detail.html", {
        "log": log, "candidates": candidates, "kept": len(kept),
        "limit": log.request.get("limit"), "budget_tokens": log.budget.get("limit"),
        "budget_used": log.budget.get("used"), "include": ", ".join(log.request.get("include") or ["memory"]),
        "timings": log.timings_ms, "dropped": sorted(log.dropped.items()),
    })


def _candidate(position: int, entry: dict[str, Any]) -> dict[str, Any]:
    readable = not entry.get("masked")
    text = entry.get("text")
    if (readable or not text) and (entry.get("deleted") or entry.get("reason") == "deleted"):  # masked stays masked
        text = "(deleted)"
    return {
        "position": position, "source": entry.get("source", "memory"), "id": entry.get("id"),
        "memory_id": entry.get("memory_id"), "text": text, "masked": not readable,
        "lexical_rank": entry.get("lexical_rank"), "semantic_rank": entry.get("semantic_rank"),
        "similarity": entry.get("similarity"), "lexical": entry.get("lexical"),
        "relevance": entry.get("relevance"), "score": entry.get("score"), "tokens": entry.get("tokens"),
        "authority": entry.get("authority"),
        "status": entry.get("status"), "selected": bool(entry.get("selected")),
        "reason": entry.get("reason") or ("kept" if entry.get("selected") else None),
        "namespace": "/".join(entry.get("namespace") or []),
    }
