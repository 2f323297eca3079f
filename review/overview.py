"""Reads for the operator's overview: one aggregate query per figure, grouped by tenant.

Every figure is restricted in SQL to the tenants the operator may see (``tenant_id__in``), and none of
them reads memory content: counts, ages, statuses, codes and ids only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Max, Min, Q
from django.db.models.functions import TruncHour
from django.urls import reverse
from django.utils import timezone

from memory.deletion.models import DeletionJob
from memory.models import AuditEntry, Candidate, Conflict, MemoryRecord, RecordStatus
from memory.queues import QUEUES
from memory.refusals import ACTION as REFUSED
from memory.refusals import CODES as REFUSAL_CODES
from memory.retrieval.models import RetrievalLog
from review.charts import PALETTE, Chart, Series

RECENT = timedelta(hours=24)


@dataclass
class Figure:
    """One figure of one tenant: how many, and the oldest (or latest) time it concerns."""

    n: int = 0
    oldest: datetime | None = None


@dataclass
class TenantFigures:
    pending_review: Figure = field(default_factory=Figure)
    open_conflicts: Figure = field(default_factory=Figure)
    deletions: dict[str, Figure] = field(default_factory=dict)  # by job status
    embeddings_pending: Figure = field(default_factory=Figure)
    retrievals_last_hour: int = 0
    refusals: dict[str, Figure] = field(default_factory=dict)  # by code, in the last 24 hours


def _by_tenant(rows: Any) -> dict[int, Figure]:
    return {r["tenant_id"]: Figure(r["n"], r["oldest"]) for r in rows}


def pending_review(tenant_ids: list[int]) -> dict[int, Figure]:
    return _by_tenant(Candidate.objects.filter(tenant_id__in=tenant_ids, status=Candidate.Status.REVIEW)
                      .values("tenant_id").annotate(n=Count("pk"), oldest=Min("created_at")).order_by())


def open_conflicts(tenant_ids: list[int]) -> dict[int, Figure]:
    return _by_tenant(Conflict.objects.filter(tenant_id__in=tenant_ids, status=Conflict.Status.OPEN)
                      .values("tenant_id").annotate(n=Count("pk"), oldest=Min("created_at")).order_by())


# Pending jobs whose last run failed and that wait for their automatic retry: shown as a figure of their own.
RETRYING = "retrying"


def deletions_by_status(tenant_ids: list[int]) -> dict[int, dict[str, Figure]]:
    found: dict[int, dict[str, Figure]] = {}
    for r in (DeletionJob.objects.filter(tenant_id__in=tenant_ids).values("tenant_id", "status")
              .annotate(n=Count("pk"), oldest=Min("created_at"),
                        retrying=Count("pk", filter=Q(retry_at__isnull=False)),
                        oldest_retrying=Min("created_at", filter=Q(retry_at__isnull=False))).order_by()):
        found.setdefault(r["tenant_id"], {})[r["status"]] = Figure(r["n"], r["oldest"])
        if r["status"] == DeletionJob.Status.PENDING and r["retrying"]:
            found[r["tenant_id"]][RETRYING] = Figure(r["retrying"], r["oldest_retrying"])
    return found


def embeddings_pending(tenant_ids: list[int]) -> dict[int, Figure]:
    """Live records of embedded classes whose vector the worker has not computed yet (the semantic
    leg of retrieval cannot find them until it has; the lexical leg can)."""
    return _by_tenant(MemoryRecord.objects.filter(tenant_id__in=tenant_ids, embedding__isnull=True,
                                                  memory_class__embed=True, status=RecordStatus.ACTIVE)
                      .values("tenant_id").annotate(n=Count("pk"), oldest=Min("created_at")).order_by())


def retrievals_since(tenant_ids: list[int], since: datetime) -> dict[int, int]:
    return dict(RetrievalLog.objects.filter(tenant_id__in=tenant_ids, created_at__gte=since)
                .values_list("tenant_id").annotate(n=Count("pk")).values_list("tenant_id", "n").order_by())


def refusals_by_code(tenant_ids: list[int], since: datetime) -> dict[int, dict[str, Figure]]:
    """Refusals recorded by the API (memory/refusals.py), by code; ``oldest`` holds the latest one."""
    found: dict[int, dict[str, Figure]] = {}
    for r in (AuditEntry.objects.filter(tenant_id__in=tenant_ids, action=REFUSED, created_at__gte=since)
              .values("tenant_id", "object_id").annotate(n=Count("pk"), latest=Max("created_at")).order_by()):
        found.setdefault(r["tenant_id"], {})[r["object_id"]] = Figure(r["n"], r["latest"])
    return found


def tenant_figures(tenant_ids: list[int], *, now: datetime | None = None) -> dict[int, TenantFigures]:
    """Every per-tenant figure of the overview: six queries, whatever the number of tenants."""
    now = now or timezone.now()
    pending, conflicts = pending_review(tenant_ids), open_conflicts(tenant_ids)
    deletions, embeddings = deletions_by_status(tenant_ids), embeddings_pending(tenant_ids)
    retrievals, refusals = retrievals_since(tenant_ids, now - timedelta(hours=1)), refusals_by_code(tenant_ids,
                                                                                                    now - RECENT)
    return {t: TenantFigures(pending_review=pending.get(t, Figure()), open_conflicts=conflicts.get(t, Figure()),
                             deletions=deletions.get(t, {}), embeddings_pending=embeddings.get(t, Figure()),
                             retrievals_last_hour=retrievals.get(t, 0), refusals=refusals.get(t, {}))
            for t in tenant_ids}


# --- worker health (not per tenant: one worker pool serves them all) -------------------------------


@dataclass
class WorkerHealth:
    clusters: list[dict[str, Any]]
    queued: int
    failed_recently: int

    @property
    def status(self) -> str:
        return "ok" if self.clusters else "down"


def worker_health(*, now: datetime | None = None) -> WorkerHealth:
    """Clusters that reported to the shared cache (as ``GET /api/v1/health`` reads them), tasks waiting
    in the ORM queue, and tasks that failed in the last 24 hours."""
    from django_q.brokers import get_broker
    from django_q.models import Failure, OrmQ
    from django_q.status import Stat

    now = now or timezone.now()
    try:
        stats = Stat.get_all(get_broker())
    except Exception:  # noqa: BLE001 - an unreachable broker means no worker, not a 500
        stats = []
    clusters = [{"host": s.host, "pid": s.pid, "status": s.status, "workers": len(s.workers),
                 "uptime": timedelta(seconds=int(s.uptime())) if s.tob else None} for s in stats]
    return WorkerHealth(clusters=clusters, queued=OrmQ.objects.count(),
                        failed_recently=Failure.objects.filter(stopped__gte=now - RECENT).count())


def failures_by_task(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Failed tasks of the last 24 hours by function (names only: a task's arguments may hold content)."""
    from django_q.models import Failure

    now = now or timezone.now()
    return list(Failure.objects.filter(stopped__gte=now - RECENT).values("func")
                .annotate(n=Count("pk"), latest=Max("stopped")).order_by("-n", "func"))


# --- detail pages ---------------------------------------------------------------------------------


def retrievals_by_hour(tenant_ids: list[int], *, now: datetime | None = None) -> list[dict[str, Any]]:
    now = now or timezone.now()
    return list(RetrievalLog.objects.filter(tenant_id__in=tenant_ids, created_at__gte=now - RECENT)
                .annotate(hour=TruncHour("created_at")).values("hour", "tenant__slug")
                .annotate(n=Count("pk")).order_by("-hour", "tenant__slug"))


def embeddings_by_class(tenant_ids: list[int]) -> list[dict[str, Any]]:
    return list(MemoryRecord.objects.filter(tenant_id__in=tenant_ids, embedding__isnull=True,
                                            memory_class__embed=True, status=RecordStatus.ACTIVE)
                .values("tenant__slug", "memory_class__name")
                .annotate(n=Count("pk"), oldest=Min("created_at")).order_by("tenant__slug", "memory_class__name"))


def deletion_jobs(tenant_ids: list[int], *, status: str = "", limit: int = 200) -> list[DeletionJob]:
    jobs = DeletionJob.objects.filter(tenant_id__in=tenant_ids).select_related("tenant")
    if status == RETRYING:
        jobs = jobs.filter(status=DeletionJob.Status.PENDING, retry_at__isnull=False)
    elif status:
        jobs = jobs.filter(status=status)
    # Oldest first: the job that has waited longest is the one to look at.
    return list(jobs.order_by("created_at", "pk").defer("markers_sealed", "plan")[:limit])


def refusals(tenant_ids: list[int], *, code: str = "", limit: int = 200) -> list[AuditEntry]:
    rows = AuditEntry.objects.filter(tenant_id__in=tenant_ids, action=REFUSED).select_related("tenant")
    if code in REFUSAL_CODES:
        rows = rows.filter(object_id=code)
    return list(rows.order_by("-created_at", "-pk")[:limit])


# --- charts of the last 24 hours (one query each, drawn by review/charts.py) ------------------------


def _hours(now: datetime) -> list[datetime]:
    """The 24 hour slots ending with the current one, oldest first."""
    current = now.replace(minute=0, second=0, microsecond=0)
    return [current - timedelta(hours=23 - i) for i in range(24)]


def _hour_label(hour: datetime) -> str:
    return f"{timezone.localtime(hour):%H}:00"


def retrievals_chart(tenant_ids: list[int], *, now: datetime) -> Chart:
    hours = _hours(now)
    found = dict(RetrievalLog.objects.filter(tenant_id__in=tenant_ids, created_at__gte=hours[0])
                 .annotate(hour=TruncHour("created_at")).values_list("hour").annotate(n=Count("pk"))
                 .values_list("hour", "n").order_by())
    return Chart(id="chart-retrievals", title="Retrievals per hour, last 24 hours", unit="retrievals",
                 labels=[_hour_label(h) for h in hours],
                 series=[Series("Retrievals", [found.get(h, 0) for h in hours])],
                 href=reverse("overview-retrievals"), link_text="Retrievals by hour and tenant")


def refusals_chart(tenant_ids: list[int], *, now: datetime) -> Chart:
    hours = _hours(now)
    found: dict[tuple[datetime, str], int] = {}
    for hour, code, n in (AuditEntry.objects.filter(tenant_id__in=tenant_ids, action=REFUSED, created_at__gte=hours[0])
                          .annotate(hour=TruncHour("created_at")).values_list("hour", "object_id")
                          .annotate(n=Count("pk")).values_list("hour", "object_id", "n").order_by()):
        found[(hour, code)] = n
    codes = list(REFUSAL_CODES) + sorted({code for _, code in found} - set(REFUSAL_CODES))
    series = [Series(code, [found.get((h, code), 0) for h in hours], PALETTE[i % len(PALETTE)])
              for i, code in enumerate(codes)]
    return Chart(id="chart-refusals", title="Refusals per hour by reason, last 24 hours", unit="refusals",
                 labels=[_hour_label(h) for h in hours], series=series,
                 href=reverse("overview-refusals"), link_text="Every refusal, with its code and route")


def waiting_chart(figures: dict[int, TenantFigures], *, queued: dict[str, int]) -> Chart:
    """Work waiting now: for people (review, conflicts) and for the worker (deletions, embeddings, each task
    queue). Snapshot, not history: nothing records past queue depths."""
    f = list(figures.values())
    people = [("Candidates to review", sum(t.pending_review.n for t in f)),
              ("Open conflicts", sum(t.open_conflicts.n for t in f)),
              ("Deletions waiting", sum((t.deletions.get("pending") or Figure()).n for t in f)),
              ("Embeddings pending", sum(t.embeddings_pending.n for t in f))]
    tasks = [(f"Tasks in queue {q}", queued.get(q, 0)) for q in QUEUES]
    rows = people + tasks
    return Chart(id="chart-waiting", title="Work waiting now, by queue", unit="items waiting",
                 labels=[r[0] for r in rows], series=[Series("Waiting", [r[1] for r in rows], PALETTE[2])],
                 href=reverse("overview-worker"), link_text="The worker and its queues", horizontal=True,
                 notes=["Task queues are shared by every tenant; the other figures are your tenants'."])


def queued_by_queue() -> dict[str, int]:
    from django_q.models import OrmQ

    return dict(OrmQ.objects.values_list("key").annotate(n=Count("pk")).values_list("key", "n").order_by())


def deletion_durations_chart(tenant_ids: list[int], *, now: datetime) -> Chart:
    """Per hour of completion: the longest deletion job (request to completion), in seconds; the table adds
    the number of jobs and their average."""
    hours = _hours(now)
    duration = ExpressionWrapper(F("completed_at") - F("created_at"), output_field=DurationField())
    rows = {r["hour"]: r for r in (
        DeletionJob.objects.filter(tenant_id__in=tenant_ids, status=DeletionJob.Status.COMPLETED,
                                   completed_at__gte=hours[0])
        .annotate(hour=TruncHour("completed_at")).values("hour")
        .annotate(n=Count("pk"), longest=Max(duration), average=Avg(duration)).order_by())}

    def seconds(hour: datetime, key: str) -> float:
        value = rows.get(hour, {}).get(key)
        return round(value.total_seconds(), 1) if value is not None else 0

    return Chart(id="chart-deletions", title="Longest deletion job per hour, last 24 hours (seconds)",
                 unit="seconds", labels=[_hour_label(h) for h in hours],
                 series=[Series("Longest (s)", [seconds(h, "longest") for h in hours], PALETTE[1])],
                 href=f"{reverse('overview-deletions')}?status=completed", link_text="Completed deletion jobs",
                 notes=[f"{sum(r['n'] for r in rows.values())} job(s) completed in the last 24 hours."],
                 table_series=[Series("Jobs", [rows.get(h, {}).get("n", 0) for h in hours]),
                               Series("Average (s)", [seconds(h, "average") for h in hours])])


def overview_charts(tenant_ids: list[int], figures: dict[int, TenantFigures], *,
                    now: datetime | None = None) -> list[Chart]:
    """The overview's four charts: four queries beside the figures (which the waiting chart reuses)."""
    now = now or timezone.now()
    return [retrievals_chart(tenant_ids, now=now), refusals_chart(tenant_ids, now=now),
            waiting_chart(figures, queued=queued_by_queue()), deletion_durations_chart(tenant_ids, now=now)]
