"""/review/overview/: the operator's view of the system at a glance, and the pages that explain each figure.

For staff (every tenant) and reviewers (the tenants they review); anyone else gets 404. Plain HTML,
no script: each figure is one aggregate query (review/overview.py) and links to the page behind it. The one
action: a failed deletion job can be run again from its page.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory.deletion.models import DeletionJob
from memory.deletion.presenters import job_payload
from memory.deletion.services import deletion_retry
from memory.identity.access import access_operator_deletion, operator_tenants, reviewer_of
from memory.models import Tenant
from memory.refusals import CODES as REFUSAL_CODES
from review import overview


def _tenants(request: HttpRequest) -> tuple[list[Tenant], list[Tenant]]:
    """The operator's tenants, and those narrowed by ?tenant=<slug> (404 for a tenant that is not theirs)."""
    tenants = operator_tenants(request.user)
    wanted = request.GET.get("tenant", "")
    if not wanted:
        return tenants, tenants
    chosen = [t for t in tenants if t.slug == wanted]
    if not chosen:
        raise Http404("No such tenant.")
    return tenants, chosen


def _reviewed(request: HttpRequest) -> set[int]:
    return set(reviewer_of(request.user).tenant_ids)


@login_required
def overview_home(request: HttpRequest) -> HttpResponse:
    all_tenants, tenants = _tenants(request)
    figures = overview.tenant_figures([t.pk for t in tenants])
    reviewed = _reviewed(request)
    rows = [{"tenant": t, "f": figures[t.pk], "reviewed": t.pk in reviewed,
             "oldest_pending_deletion": (figures[t.pk].deletions.get("pending") or overview.Figure()).oldest}
            for t in tenants]
    return render(request, "review/overview/index.html", {
        "rows": rows, "worker": overview.worker_health(),
        "charts": overview.overview_charts([t.pk for t in tenants], figures), "refusal_codes": REFUSAL_CODES,
        "deletion_statuses": [*DeletionJob.Status.values, overview.RETRYING], "all_tenants": all_tenants,
        "tenant": request.GET.get("tenant", ""),
    })


@login_required
def overview_deletions(request: HttpRequest) -> HttpResponse:
    tenants = _tenants(request)[1]
    statuses = [*DeletionJob.Status.values, overview.RETRYING]
    status = request.GET.get("status", "")
    if status and status not in statuses:
        status = ""
    jobs = overview.deletion_jobs([t.pk for t in tenants], status=status)
    return render(request, "review/overview/deletions.html", {
        "jobs": jobs, "status": status, "statuses": statuses, "tenant": request.GET.get("tenant", "")})


@login_required
def overview_deletion(request: HttpRequest, deletion_id: str) -> HttpResponse:
    job = access_operator_deletion(request.user, deletion_id)
    return render(request, "review/overview/deletion.html", {
        "job": job_payload(job), "tenant": job.tenant, "requested_by": job.requested_by, "finished": True,
        "poll_url": reverse("overview-deletion", args=[job.pk]), "row": job,
        "retryable": job.status == DeletionJob.Status.FAILED or job.retry_at is not None})


@require_POST
@login_required
def overview_deletion_retry(request: HttpRequest, deletion_id: str) -> HttpResponse:
    """Run a failed job (or one waiting for its automatic retry) again now: reviewers of its tenant and staff."""
    job = access_operator_deletion(request.user, deletion_id)
    job = deletion_retry(job_id=job.pk, actor=f"user:{request.user.pk}")
    messages.success(request, f"Deletion {job.pk} is queued again.")
    return redirect("overview-deletion", deletion_id=job.pk)


@login_required
def overview_refusals(request: HttpRequest) -> HttpResponse:
    tenants = _tenants(request)[1]
    code = request.GET.get("code", "")
    return render(request, "review/overview/refusals.html", {
        "rows": overview.refusals([t.pk for t in tenants], code=code), "code": code if code in REFUSAL_CODES else "",
        "codes": REFUSAL_CODES, "tenant": request.GET.get("tenant", "")})


@login_required
def overview_embeddings(request: HttpRequest) -> HttpResponse:
    tenants = _tenants(request)[1]
    return render(request, "review/overview/embeddings.html", {
        "rows": overview.embeddings_by_class([t.pk for t in tenants]), "worker": overview.worker_health()})


@login_required
def overview_worker(request: HttpRequest) -> HttpResponse:
    operator_tenants(request.user)
    return render(request, "review/overview/worker.html", {
        "worker": overview.worker_health(), "failures": overview.failures_by_task()})


@login_required
def overview_retrievals(request: HttpRequest) -> HttpResponse:
    tenants = _tenants(request)[1]
    return render(request, "review/overview/retrievals.html", {
        "rows": overview.retrievals_by_hour([t.pk for t in tenants]), "tenant": request.GET.get("tenant", "")})
