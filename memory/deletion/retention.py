"""Privacy classes over time: TTL expiry and maximum retention (purge_expired, hourly and by command).

- A record past ``valid_until`` (its class's default TTL set it at write) becomes ``expired``: it
  stops being served but keeps its content until retention ends, so history still explains it.
- A record older than its class's ``max_retention`` (counted from ``created_at``) is deleted through
  the same deletion job as a user's DELETE: every surface, tombstone, verification.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import models, transaction
from django.db.models import ExpressionWrapper, F
from django.db.models.functions import Now

from memory.audit import audit
from memory.deletion.models import DeletionJob
from memory.deletion.services import retention_delete
from memory.models import MemoryRecord, RecordStatus, Tombstone
from memory.retrieval.services import retrieval_logs_purge_expired


@dataclass
class SweepResult:
    expired: int = 0
    past_retention: int = 0
    jobs: list[str] = field(default_factory=list)
    tombstones_dropped: int = 0
    logs_dropped: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"expired": self.expired, "past_retention": self.past_retention, "jobs": len(self.jobs),
                "tombstones_dropped": self.tombstones_dropped, "logs_dropped": self.logs_dropped}


def expired_qs() -> models.QuerySet[MemoryRecord]:
    return MemoryRecord.objects.filter(status=RecordStatus.ACTIVE, valid_until__isnull=False, valid_until__lte=Now())


def past_retention_qs() -> models.QuerySet[MemoryRecord]:
    cutoff = ExpressionWrapper(Now() - F("memory_class__max_retention"), output_field=models.DateTimeField())
    in_flight = DeletionJob.objects.exclude(status=DeletionJob.Status.COMPLETED).values_list("plan", flat=True)
    busy = {mid for plan in in_flight for mid in plan.get("memory_ids", [])}
    return (MemoryRecord.objects.exclude(status=RecordStatus.DELETED)
            .filter(memory_class__max_retention__isnull=False, created_at__lte=cutoff).exclude(pk__in=busy))


def purge_expired(*, dry_run: bool, track: Callable[[Iterable, str], Iterable] | None = None) -> SweepResult:
    result = SweepResult()
    track = track or (lambda items, _label: items)
    if dry_run:
        result.expired = expired_qs().count()
        result.past_retention = past_retention_qs().count()
        return result
    with transaction.atomic():
        rows = list(expired_qs().select_for_update(of=("self",)).values_list("pk", "tenant_id"))
        result.expired = MemoryRecord.objects.filter(pk__in=[pk for pk, _ in rows]).update(
            status=RecordStatus.EXPIRED, status_reason="ttl elapsed")
        by_tenant: dict[int, list[str]] = defaultdict(list)
        for pk, tenant_id in rows:
            by_tenant[tenant_id].append(pk)
        for tenant_id, ids in sorted(by_tenant.items()):
            audit(actor="system:retention", action="memory.expire", object_type="memory", object_id="sweep",
                  tenant_id=tenant_id, data={"memory_ids": ids})
    groups: dict[int, list[MemoryRecord]] = defaultdict(list)
    for record in past_retention_qs().order_by("subject_id", "created_at"):
        groups[record.subject_id].append(record)
    for subject_id in track(list(groups), "deleting past retention"):
        job = retention_delete(records=groups[subject_id])
        if job is not None:
            result.jobs.append(job.pk)
            result.past_retention += len(groups[subject_id])
    result.tombstones_dropped = Tombstone.objects.filter(expires_at__lte=Now()).delete()[0]
    result.logs_dropped = retrieval_logs_purge_expired()
    return result
