"""One scrape of ``GET /metrics``: every process's metrics (memory/metrics.py) plus the figures that live in the
database, read at scrape time (queue depths, derived work behind), never kept in a process."""

from __future__ import annotations

import datetime as dt
import glob
import logging
import os
from collections.abc import Iterator
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone
from django_q.models import Failure, OrmQ
from prometheus_client import CollectorRegistry, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from memory.metrics import multiprocess_dir
from memory.queues import QUEUES
from memory.retrieval.derived import derived_pending_by_kind
from memory.retrieval.models import SubjectIndex
from memory.retrieval.subject_index import capacity

logger = logging.getLogger("engram.metrics")
# A metrics file starts with the 8 bytes that say how much of it is used (prometheus_client.mmap_dict).
_HEADER_BYTES = 8


class DatabaseCollector(Collector):
    """Gauges read from the database at each scrape: a few aggregate queries, no content, no tenant."""

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only: registering must not query

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queue = GaugeMetricFamily("engram_queue_tasks", "Tasks per queue: waiting (queued), claimed by a worker "
                                  "(running), failed in the last 24 hours (failed).", labels=["queue", "state"])
        pending = GaugeMetricFamily("engram_derived_pending", "Derived work not done yet, by kind, as health's "
                                    "derived_pending_by_kind: embeddings, context_windows, subject_indexes, "
                                    "summaries, knowledge_chunks.", labels=["kind"])
        places = GaugeMetricFamily("engram_subject_index_places", "Places for large subjects' own indexes: taken "
                                   "(subjects indexed) and capacity (ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS).",
                                   labels=["state"])
        try:
            for (name, state), n in sorted(queue_task_counts().items()):
                queue.add_metric([name, state], n)
            for kind, n in sorted(derived_pending_by_kind().items()):
                pending.add_metric([kind], n)
            places.add_metric(["taken"], SubjectIndex.objects.count())
            places.add_metric(["capacity"], capacity())
        except Exception:  # noqa: BLE001 - a scrape during a database outage still answers (the web figures)
            logger.warning("metrics: the database figures could not be read", exc_info=True)
        yield queue
        yield pending
        yield places


def queue_task_counts(*, now: dt.datetime | None = None) -> dict[tuple[str, str], int]:
    """(queue, state) -> tasks, for every queue: django-q2's ORM broker table and its failures table."""
    now = now or timezone.now()
    counts = {(q, state): 0 for q in QUEUES for state in ("queued", "running", "failed")}
    for row in OrmQ.objects.values("key").annotate(queued=Count("id", filter=Q(lock__lte=now)),
                                                   running=Count("id", filter=Q(lock__gt=now))).order_by():
        if row["key"] in QUEUES:
            counts[(row["key"], "queued")] = row["queued"]
            counts[(row["key"], "running")] = row["running"]
    for row in (Failure.objects.filter(stopped__gte=now - dt.timedelta(hours=24)).values("cluster")
                .annotate(n=Count("id")).order_by()):
        if row["cluster"] in QUEUES:
            counts[(row["cluster"], "failed")] = row["n"]
    return counts


class _SettledFiles(multiprocess.MultiProcessCollector):
    """prometheus-client's multiprocess collector, leaving out the files a process is still creating: a process
    opens its file empty and then sizes it, and a scrape that read it in between failed on the empty header (a 500
    from ``/metrics`` while gunicorn replaced a web process). Such a file holds no value yet; the next scrape reads
    it."""

    def collect(self) -> Any:
        files = []
        for path in glob.glob(os.path.join(self._path, "*.db")):
            try:
                if os.path.getsize(path) >= _HEADER_BYTES:
                    files.append(path)
            except FileNotFoundError:  # a dead process's live gauge, removed since the glob
                continue
        return self.merge(files, accumulate=True)


class _ProcessMetrics(Collector):
    """This process's own metrics (the single-process case: runserver, tests)."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()


def scrape_registry() -> CollectorRegistry:
    """The registry one scrape renders: every process's metrics (or this process's) plus the database's."""
    registry = CollectorRegistry(auto_describe=False)
    directory = multiprocess_dir()
    if directory:
        _SettledFiles(registry, path=directory)
    else:
        registry.register(_ProcessMetrics())
    registry.register(DatabaseCollector())
    return registry
