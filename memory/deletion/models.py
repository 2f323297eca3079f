"""A deletion job and its steps: one step per registered purge surface, then verification.

The job row must survive the erasure it reports on without becoming a row *about* the subject:
it keeps the subject only as a keyed hash (``subject_hash``, the same hash tombstones use) and a
nullable FK that a subject erasure nulls when the Subject row goes. While the job runs it needs the
content it hunts for (the markers for read checks); those are kept Fernet-sealed in
``markers_sealed`` and blanked when the job completes.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory.ids import new_id
from memory.models import Subject, Tenant


def new_deletion_id() -> str:
    return new_id("del")


class DeletionJob(models.Model):
    class Kind(models.TextChoices):
        MEMORY = "memory"  # one record (and the versions it superseded)
        SUBJECT = "subject"  # everything about one subject
        RETENTION = "retention"  # records past their class's maximum retention (purge_expired)
        THREAD = "thread"  # the events of one conversation thread, up to a sequence number

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=40, default=new_deletion_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                db_constraint=False)
    subject_hash = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The record the caller asked to delete (kind=memory): the idempotency key of memory_delete.
    memory_id = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(max_length=500, blank=True, help_text="Why the job failed (never content).")
    requested_by = models.CharField(max_length=64, help_text="Actor: agent_key:<id>, user:<id> or system.")
    # Ids only: {"memory_ids": [...], "event_ids": [...], "subject_id": <pk>, "tombstones": [keyed hashes]}.
    plan = models.JSONField(default=dict)
    markers_sealed = models.TextField(blank=True, help_text="Fernet token of the markers; blank once completed.")
    runs = models.PositiveIntegerField(default=0)
    # Automatic retries of a job whose run failed: it stays ``pending`` (the person's deletion is still under
    # way) with ``reason`` naming the last failure for operators, and the sweep runs it again at ``retry_at``.
    # Once ENGRAM_DELETION_JOB_RETRIES are spent it ends ``failed``; an operator may retry it at any time.
    retries = models.PositiveIntegerField(default=0)
    retry_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "memory_id"], condition=Q(kind="memory"),
                                    name="deletion_one_job_per_memory"),
        ]
        indexes = [models.Index(fields=["tenant", "subject_hash"], name="deletion_subject_idx")]

    def __str__(self) -> str:
        return self.id


class DeletionStep(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    # The job's tenant, copied: the distribution column on a tenant-sharded database (memory/sharding.py).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(DeletionJob, on_delete=models.CASCADE, related_name="steps", db_constraint=False)
    name = models.CharField(max_length=64)
    position = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    rows = models.IntegerField(default=0, help_text="Rows the last successful attempt touched.")
    last_error = models.CharField(max_length=500, blank=True)
    # Worker time of the last run of this step (all its attempts), for operators and the benchmark.
    duration_ms = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [models.UniqueConstraint(fields=["job", "name", "tenant"], name="deletion_step_unique_name")]
