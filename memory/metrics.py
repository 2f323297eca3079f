"""Every Prometheus metric Engram exports (``GET /metrics``, config/observability.py), defined in one place.

Counters and histograms are kept by the process where the event happens (a web process, a worker) and, when
``PROMETHEUS_MULTIPROC_DIR`` is set (``manage.py serve`` sets it), written to that directory so whichever web
process answers a scrape adds up every process's values (prometheus_client's multiprocess mode). Figures that
live in the database (queue depths, derived work behind) are read at scrape time by ``DatabaseCollector``
(memory/metrics_scrape.py),
never kept in a process.

No label carries a tenant's data: labels are routes (URL patterns, not paths), methods, statuses, stage and
queue names, task and service function names and fixed kinds. Tenants, subjects and namespaces are never labels.
"""

from __future__ import annotations

import datetime as dt
import logging
import os

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

logger = logging.getLogger("engram.metrics")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# A ``_created`` timestamp series per counter and histogram only doubles the series (multiprocess mode has none).
disable_created_metrics()

HTTP_REQUEST_SECONDS = Histogram(
    "engram_http_request_duration_seconds", "Time to answer an HTTP request, by URL pattern, method and status.",
    ["route", "method", "status"])
RETRIEVE_STAGE_SECONDS = Histogram(
    "engram_retrieve_stage_seconds", "Time each stage of a retrieve took (embed the query, memory candidates, "
    "other sources, ranking and the token budget, writing the retrieval log).", ["stage"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
DELETION_JOBS = Counter("engram_deletion_jobs", "Deletion jobs that ended, by how they ended.", ["status"])
DELETION_SECONDS = Histogram(
    "engram_deletion_duration_seconds", "Time from a deletion's request to its completion (verified).",
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0))
RECORDS_WRITTEN = Counter(
    "engram_records_written", "Memory records written (replays not counted), by write path.", ["path"])
THROTTLED = Counter("engram_throttled_requests", "Requests refused with 429 by a rate limit.", ["limit"])
EMBEDDER_DEGRADED = Gauge(
    "engram_embedder_degraded", "1 while the embedding model fails in some process: retrieval there is "
    "lexical-only and new records wait for their embeddings.", multiprocess_mode="livemax")
DEADLOCK_RETRIES = Counter(
    "engram_deadlock_retries", "Transactions run again after PostgreSQL chose them as a deadlock's victim, by "
    "operation (the service function; memory/db/retry.py).", ["operation"])
TASK_SECONDS = Histogram(
    "engram_task_duration_seconds", "Time a worker ran a task, by queue, task function and result.",
    ["queue", "task", "result"], buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0, 600.0))

# The write gate's audit action -> the path label (memory/records/services.py, memory/consolidation/).
WRITE_PATHS = {"memory.write": "statement", "outcome.record": "outcome", "memory.correct": "correction",
               "memory.approve": "candidate", "memory.candidate_record": "candidate"}
RETRIEVE_STAGES = ("embed", "memory", "sources", "budget", "log")
DELETION_STATUSES = ("completed", "failed")
THROTTLE_LIMITS = ("agent_key", "anonymous", "failed_key")
ROUTE_UNMATCHED = "<unmatched>"
ROUTE_STATIC = "<static>"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# Series with a known, fixed set of labels start at zero in every process: a rate() over them works from the
# first scrape, and each family is in the exposition before its first event.
for _stage in RETRIEVE_STAGES:
    RETRIEVE_STAGE_SECONDS.labels(stage=_stage)
for _status in DELETION_STATUSES:
    DELETION_JOBS.labels(status=_status)
for _path in sorted(set(WRITE_PATHS.values())):
    RECORDS_WRITTEN.labels(path=_path)
for _limit in THROTTLE_LIMITS:
    THROTTLED.labels(limit=_limit)


# --- recording (called where the event happens) -------------------------------------------------------


def http_request(*, route: str, method: str, status: int, seconds: float) -> None:
    HTTP_REQUEST_SECONDS.labels(route=route, method=method if method in METHODS else "OTHER",
                                status=str(status)).observe(seconds)


def retrieve_stages(timings_ms: dict[str, float]) -> None:
    for stage, ms in timings_ms.items():
        RETRIEVE_STAGE_SECONDS.labels(stage=stage).observe(max(0.0, ms) / 1000.0)


def deletion_finished(*, status: str, requested_at: dt.datetime | None = None,
                      finished_at: dt.datetime | None = None) -> None:
    DELETION_JOBS.labels(status=status).inc()
    if requested_at is not None and finished_at is not None:
        DELETION_SECONDS.observe(max(0.0, (finished_at - requested_at).total_seconds()))


def records_written(actions: list[str]) -> None:
    for action in actions:
        RECORDS_WRITTEN.labels(path=WRITE_PATHS.get(action, "other")).inc()


def throttled(limit: str) -> None:
    THROTTLED.labels(limit=limit).inc()


def deadlock_retries_counted(operation: str) -> None:
    """The operation's series, at zero from the start (called where an operation is declared retryable)."""
    DEADLOCK_RETRIES.labels(operation=operation)


def deadlock_retried(operation: str) -> None:
    DEADLOCK_RETRIES.labels(operation=operation).inc()


def embedder_degraded(degraded: bool) -> None:
    EMBEDDER_DEGRADED.set(1 if degraded else 0)


def task_finished(*, queue: str, func: str, result: str, seconds: float) -> None:
    TASK_SECONDS.labels(queue=queue, task=func, result=result).observe(seconds)


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def mark_process_dead(pid: int) -> None:
    """gunicorn's child_exit: the dead worker's live gauges stop counting (its counters stay summed)."""
    if multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
