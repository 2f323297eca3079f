"""Thread state: one thread's append-only event log, workflow checkpoints, tool calls and summaries.

Kept apart from long-term memory (its own tables, endpoints and retention). Every row carries the
tenant and the subject it belongs to, so every query can put both predicates in SQL.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from memory.ids import new_event_id, new_id
from memory.models import EMBEDDING_DIMENSIONS, Subject, Tenant


def new_thread_id() -> str:
    return new_id("thr")


def new_summary_id() -> str:
    return new_id("sum")


class Thread(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_thread_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="threads", db_constraint=False)
    title = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The last sequence number handed out. Appends lock this row and increment it, so numbers are
    # gap-free: a rolled-back append rolls its increment back too.
    last_seq = models.PositiveBigIntegerField(default=0)
    actor = models.CharField(max_length=64)
    # Idempotency-Key of the POST that created it: a client (a framework session) names its thread
    # with a key of its own and gets the same thread back on every create.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    payload_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "subject", "created_at"], name="thread_scope_idx")]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "subject", "idempotency_key"], name="thread_unique_idem",
                                    condition=Q(idempotency_key__isnull=False)),
        ]


class EventKind(models.TextChoices):
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    APPROVAL = "approval"
    # A client's item the server does not interpret (a framework's reasoning item, an encrypted
    # envelope): kept verbatim in ``data``, left out of summaries.
    OTHER = "other"


class ThreadEvent(models.Model):
    """One append-only entry. Never updated, except deletion: content blanked, the row and its seq kept."""

    class Status(models.TextChoices):
        RECORDED = "recorded"
        DELETED = "deleted"

    id = models.CharField(primary_key=True, max_length=40, default=new_event_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="events", db_constraint=False)
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    role = models.CharField(max_length=16, blank=True)
    text = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    # A correction is a new event naming the one it corrects; the corrected event stays as it was.
    corrects = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                 db_constraint=False)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    payload_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RECORDED)
    deleted_at = models.DateTimeField(null=True, blank=True)
    actor = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq", "tenant"], name="threadevent_unique_seq"),
            models.UniqueConstraint(fields=["thread", "idempotency_key", "tenant"], name="threadevent_unique_idem",
                                    condition=Q(idempotency_key__isnull=False)),
        ]
        indexes = [models.Index(fields=["tenant", "subject", "thread", "seq"], name="threadevent_scope_idx")]


class Checkpoint(models.Model):
    """The resumable state of one workflow of a subject. ``version`` is the ETag."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    workflow_id = models.CharField(max_length=128)
    version = models.PositiveIntegerField(default=1)
    thread = models.ForeignKey(Thread, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                               db_constraint=False)
    current_step = models.CharField(max_length=200, blank=True)
    completed_steps = models.JSONField(default=list, blank=True)
    pending_approval = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True)
    artifacts = models.JSONField(default=dict, blank=True)
    last_verified_outcome = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "subject", "workflow_id"], name="checkpoint_unique_workflow"),
        ]


class ToolCall(models.Model):
    """A side-effecting tool call, recorded before the effect; its verified outcome after."""

    class Status(models.TextChoices):
        PENDING = "pending"  # recorded, effect may or may not have happened: verify before retrying
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    workflow_id = models.CharField(max_length=128)
    idempotency_key = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    request_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    outcome = models.JSONField(null=True, blank=True)
    outcome_at = models.DateTimeField(null=True, blank=True)
    actor = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "subject", "workflow_id", "idempotency_key"],
                                    name="toolcall_unique_key"),
        ]


class Summary(models.Model):
    """A summary of a thread's events ``from_seq..to_seq``, knowing its sources.

    Stale summaries are never served; when staleness came from a deletion their content is blanked
    at once, so deleted words survive in no summary row.
    """

    class Origin(models.TextChoices):
        SERVER = "server"  # made by a summarizer here; regenerated when stale
        CLIENT = "client"  # written by the client; left stale with a reason

    class Status(models.TextChoices):
        FRESH = "fresh"
        STALE = "stale"

    id = models.CharField(primary_key=True, max_length=40, default=new_summary_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="summaries", db_constraint=False)
    origin = models.CharField(max_length=8, choices=Origin.choices)
    text = models.TextField(blank=True)
    from_seq = models.PositiveBigIntegerField()
    to_seq = models.PositiveBigIntegerField()
    summarizer_name = models.CharField(max_length=100)
    summarizer_version = models.CharField(max_length=100)
    unresolved = models.JSONField(default=list, blank=True)
    referenced_event_ids = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.FRESH)
    stale_reason = models.CharField(max_length=300, blank=True)
    stale_at = models.DateTimeField(null=True, blank=True)
    # The regenerated summary that replaced this stale one.
    replaced_by = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                    db_constraint=False)
    regenerates = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                    db_constraint=False)
    actor = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    search_vector = SearchVectorField(null=True, blank=True)
    # Derived, filled by a task after commit; no ANN index: the semantic leg scans one subject's
    # fresh summaries exactly (see STACK_NOTES on filtered HNSW).
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)

    class Meta:
        verbose_name_plural = "summaries"
        constraints = [
            models.CheckConstraint(condition=Q(from_seq__lte=models.F("to_seq")), name="summary_range_ordered"),
        ]
        indexes = [
            models.Index(fields=["tenant", "subject", "thread", "status"], name="summary_scope_idx"),
            GinIndex(fields=["search_vector"], name="summary_fts_idx"),
        ]
