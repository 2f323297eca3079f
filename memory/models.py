"""Long-term memory: identity, policy classes, the event log, records, candidates, conflicts, audit.

Embeddings and full-text vectors on MemoryRecord are *derived* columns: rebuilt from the record
by ``manage.py reembed``, never the source of truth.

Foreign keys between tables distributed by tenant (memory/sharding.py) are declared ``db_constraint=False``: the
database holds them as composite keys, ``(tenant_id, x_id)`` onto ``(id, tenant_id)`` primary keys, written by
``memory/migrations/0009_composite_keys.py``, which Django's single-column constraints cannot express. The ORM
still joins and cascades on ``id``; the database checks that a child row has its parent's tenant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce, Now
from pgvector.django import VectorField

from memory.ids import new_candidate_id, new_event_id, new_memory_id
from memory.namespaces import to_list, under_any_q

if TYPE_CHECKING:
    from memory.scope import Scope

EMBEDDING_DIMENSIONS = 384


class TenantQuerySet(models.QuerySet["Tenant"]):
    def reviewed_by(self, user: Any) -> TenantQuerySet:
        """The tenants ``user`` reviews: the one place the reviewer predicate is written
        (memory/identity/access.py builds every reviewer check on it)."""
        return self.filter(reviewers=user.pk)


class SubjectQuerySet(models.QuerySet["Subject"]):
    def owned_by(self, user: Any) -> SubjectQuerySet:
        """The subjects ``user`` is linked to (their own memories): the one place the owner predicate is written."""
        return self.filter(users=user.pk)


class Tenant(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    reviewers = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="reviewer_tenants", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    def __str__(self) -> str:
        return self.slug


class Subject(models.Model):
    class Kind(models.TextChoices):
        USER = "user"
        PROJECT = "project"
        AGENT = "agent"
        ORG = "org"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="subjects")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.USER)
    external_id = models.CharField(max_length=128)
    # What pages call the subject ("Alice Martin"); set by the tenant's backend when it mints a principal
    # token, or in the admin. Empty: the linked person's name, else the external id.
    display_name = models.CharField(max_length=200, blank=True, default="")
    # People who may see this subject's memories in the browser (/me/).
    users: models.ManyToManyField[Any, SubjectUser] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="subjects", blank=True, through="SubjectUser")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SubjectQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "external_id"], name="subject_unique_external_id"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.external_id}"

    @property
    def name(self) -> str:
        """The name pages show: the display name, else a linked person's full name or login, else the id.

        Reads ``users`` through ``prefetch_related("users")`` when the caller prefetched it (lists do)."""
        if self.display_name:
            return self.display_name
        for user in sorted(self.users.all(), key=lambda u: u.pk):
            full = user.get_full_name().strip() if hasattr(user, "get_full_name") else ""
            return full or user.get_username()
        return self.external_id


class SubjectUser(models.Model):
    """A person who may see a subject's memories (``Subject.users``), stored with the subject's tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    class Meta:
        db_table = "memory_subject_users"
        constraints = [models.UniqueConstraint(fields=["subject", "user", "tenant"], name="subject_user_unique")]


class AgentKey(models.Model):
    """An agent's API key. Only a SHA-256 of the key is stored; the key is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agent_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="First characters of the key, for recognising it.")
    key_hash = models.CharField(max_length=64, unique=True)
    permissions = models.JSONField(default=list, help_text="Any of read, write, propose, mint.")
    namespaces = models.JSONField(
        null=True, blank=True, help_text="Namespace prefixes this key may touch; empty means all."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class MemoryClass(models.Model):
    """Privacy policy as data: what may be stored under a namespace prefix, by whom, for how long."""

    class ModelPermission(models.TextChoices):
        WRITE = "write"  # the agent may store confirmed records
        PROPOSE = "propose"  # the agent may only submit candidates
        READ = "read"  # the agent may read but not write
        NONE = "none"  # the agent may not touch this class

    class Sensitivity(models.TextChoices):
        PUBLIC = "public"
        INTERNAL = "internal"
        PERSONAL = "personal"
        SENSITIVE = "sensitive"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memory_classes")
    name = models.SlugField(max_length=64)
    namespace_prefix = models.CharField(max_length=300)
    purpose = models.TextField(blank=True)
    allowed_readers = models.JSONField(
        default=list, help_text='Who may read: any of "owner", "agent", "reviewer".'
    )
    model_permission = models.CharField(
        max_length=8, choices=ModelPermission.choices, default=ModelPermission.PROPOSE
    )
    sensitivity = models.CharField(max_length=16, choices=Sensitivity.choices, default=Sensitivity.PERSONAL)
    encryption_required = models.BooleanField(default=False)
    embed = models.BooleanField(default=True, help_text="Compute embeddings for this class's records.")
    default_ttl = models.DurationField(null=True, blank=True)
    max_retention = models.DurationField(null=True, blank=True)
    may_cross_boundaries = models.BooleanField(default=False)
    candidates_retrievable = models.BooleanField(
        default=False, help_text="Unreviewed candidates may be served (marked as candidates)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "memory classes"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="memoryclass_unique_name"),
            models.UniqueConstraint(fields=["tenant", "namespace_prefix"], name="memoryclass_unique_prefix"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.namespace_prefix})"


class Event(models.Model):
    """Append-only log of what caused a write. Every record and candidate references one.

    ``external_id`` is the caller's ``source.event_id``: the idempotency key of the write paths.
    """

    id = models.CharField(primary_key=True, max_length=40, default=new_event_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="events", db_constraint=False)
    external_id = models.CharField(max_length=128)
    source_type = models.CharField(max_length=32)
    payload_hash = models.CharField(max_length=64)
    text = models.TextField(blank=True, help_text="What was said or observed; evidence for reviewers.")
    occurred_at = models.DateTimeField(default=None, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    actor = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "subject", "external_id"], name="event_unique_external_id"),
        ]


class SourceType(models.TextChoices):
    # Order is precedence, highest first: see memory/policy/precedence.py.
    SYSTEM_OF_RECORD = "system_of_record"
    EXPLICIT_USER_STATEMENT = "explicit_user_statement"
    ORG_RECORD = "org_record"
    VERIFIED_OUTCOME = "verified_outcome"
    MODEL_INFERRED = "model_inferred"
    SUMMARY = "summary"


class MemoryType(models.TextChoices):
    SEMANTIC = "semantic"
    EPISODIC = "episodic"


class Confidence(models.TextChoices):
    CONFIRMED = "confirmed"
    CANDIDATE = "candidate"


class RecordStatus(models.TextChoices):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    DELETED = "deleted"


class MemoryRecordQuerySet(models.QuerySet["MemoryRecord"]):
    def for_scope(self, scope: Scope, *, cross_boundaries: bool = False) -> MemoryRecordQuerySet:
        """The only way into memory rows: tenant, subject, namespace and class-reader predicates in SQL.
        (The retrieval statement writes the same predicates with psycopg.sql, memory/db/statements.py;
        tests/retrieval/test_statement_sources.py holds the two to the same rows.)

        The class's "allowed readers" is a SQL predicate too (``scope.reader_role`` must be listed),
        so no Python filter after the query decides who reads what. "May cross boundaries" is an
        opt-in for reads that want shared rows: with ``cross_boundaries=True`` the records of an
        org subject in a class that may cross boundaries are visible to every subject of the tenant.
        Writes never opt in, so precedence only ever locks and supersedes the subject's own rows.
        """
        own = Q(subject_id=scope.subject_id)
        if cross_boundaries:
            own |= Q(memory_class__may_cross_boundaries=True, subject__kind=Subject.Kind.ORG)
        qs = self.filter(own, tenant_id=scope.tenant_id,
                         memory_class__allowed_readers__contains=[scope.reader_role])
        if scope.namespaces is not None:
            qs = qs.filter(under_any_q(scope.namespaces))
        return qs

    def live(self) -> MemoryRecordQuerySet:
        """Active and inside the validity interval, judged by the database clock."""
        return self.filter(status=RecordStatus.ACTIVE).filter(Q(valid_until__isnull=True) | Q(valid_until__gt=Now()))

    def under(self, prefixes: list[str]) -> MemoryRecordQuerySet:
        return self.filter(under_any_q(prefixes))


class MemoryRecord(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_memory_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="records", db_constraint=False)
    namespace = models.CharField(max_length=300)
    kind = models.CharField(max_length=64)
    memory_type = models.CharField(max_length=16, choices=MemoryType.choices, default=MemoryType.SEMANTIC)
    # fact = {"field": ..., "value": ...}; `field` is copied out so precedence can index it.
    field = models.CharField(max_length=128)
    fact = models.JSONField()
    text = models.TextField()
    source_type = models.CharField(max_length=32, choices=SourceType.choices)
    source_event = models.ForeignKey(Event, on_delete=models.SET_NULL, null=True, related_name="records",
                                     db_constraint=False)
    source_ref = models.JSONField(null=True, blank=True, help_text="{system, id} of a system of record.")
    confidence = models.CharField(max_length=16, choices=Confidence.choices, default=Confidence.CONFIRMED)
    sensitivity = models.CharField(max_length=16, choices=MemoryClass.Sensitivity.choices)
    memory_class = models.ForeignKey(MemoryClass, on_delete=models.PROTECT, related_name="records")
    status = models.CharField(max_length=16, choices=RecordStatus.choices, default=RecordStatus.ACTIVE)
    status_reason = models.CharField(max_length=200, blank=True)
    valid_from = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    # When what the record says happened: its source event's ``occurred_at``, copied by the write gate so that a
    # conversation's turns can be read in event order through an index (the context windows' neighbours).
    occurred_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    supersedes = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                   db_constraint=False)
    superseded_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_constraint=False
    )
    content_hash = models.CharField(max_length=64, help_text="sha256 of the normalised fact, for dedupe.")
    # Derived read surfaces.
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    search_vector = SearchVectorField(null=True, blank=True)
    # A turn with a context window: its own vector and its window's direction in the proportions the semantic leg
    # scores them (memory/retrieval/context.py), so that one graph of a large subject orders its records as the
    # exact scan would (memory/retrieval/subject_index.py). NULL where there is no window: the own vector stands.
    blended_embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True, editable=False)
    # The same turn's window's lexemes (RecordContext.terms), written and cleared with the blended vector: with both
    # on the record's row, the semantic and the lexical leg score a windowed turn from that row alone, without
    # reading its window.
    context_terms = SearchVectorField(null=True, blank=True, editable=False)

    objects = MemoryRecordQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "subject", "status"], name="record_scope_idx"),
            models.Index(fields=["tenant", "subject", "namespace", "field"], name="record_head_idx"),
            GinIndex(fields=["search_vector"], name="record_fts_idx"),
            # Live records still waiting for their embedding: counted by every retrieve of an indexed (large)
            # subject without reading its other rows (memory/retrieval/candidates.py).
            models.Index(fields=["subject"], condition=Q(embedding__isnull=True, status="active"),
                         name="record_unembedded_idx"),
            # A conversation's live turns in event order: a context window finds its neighbours by reading a
            # few entries on either side of a turn, whatever the subject's size (memory/retrieval/context.py).
            models.Index("subject", "namespace", "kind", Coalesce("occurred_at", "valid_from"), "created_at", "id",
                         condition=Q(memory_type="episodic", status="active"), name="record_stream_idx"),
            # No table-wide HNSW index on embedding (measured: docs/retrieval.md): every read is scoped
            # to one subject, where pgvector 0.6's filtered HNSW under-fills and an exact scan over the
            # btree scope index is both correct and fast; and the index halved embedding-fill
            # throughput (2,003 -> 1,028 rows/s at 20k rows). A large subject gets partial indexes of
            # its own instead (memory/retrieval/subject_index.py).
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def namespace_list(self) -> list[str]:
        return to_list(self.namespace)


class Candidate(models.Model):
    """A model-inferred memory. Never a fact until consolidation (and, by policy, a reviewer) says so."""

    class Status(models.TextChoices):
        PENDING = "pending"  # waiting for consolidation
        REVIEW = "review"  # consolidated, waiting for a person
        RETRIEVABLE = "retrievable"  # kept as a low-authority candidate record by class policy
        MERGED = "merged"  # duplicate; its provenance was merged into another item
        APPROVED = "approved"
        REJECTED = "rejected"
        DISCARDED = "discarded"  # dropped by consolidation (e.g. equal to the active record)

    id = models.CharField(primary_key=True, max_length=40, default=new_candidate_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="candidates", db_constraint=False)
    namespace = models.CharField(max_length=300)
    kind = models.CharField(max_length=64)
    memory_type = models.CharField(max_length=16, choices=MemoryType.choices, default=MemoryType.SEMANTIC)
    field = models.CharField(max_length=128)
    fact = models.JSONField()
    text = models.TextField()
    source_event = models.ForeignKey(Event, on_delete=models.SET_NULL, null=True, related_name="candidates",
                                     db_constraint=False)
    # Evidence: [{"event_id", "text", "at"}], the source events' words, shown to reviewers.
    evidence = models.JSONField(default=list)
    model_confidence = models.FloatField(null=True, blank=True)
    memory_class = models.ForeignKey(MemoryClass, on_delete=models.PROTECT, null=True, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    reasons = models.JSONField(default=list, help_text="Why consolidation decided what it did.")
    # The active record this candidate would affect, as seen in consolidation's snapshot.
    conflict_record = models.ForeignKey(
        MemoryRecord, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_constraint=False
    )
    merged_into = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                    db_constraint=False)
    result_record = models.ForeignKey(
        MemoryRecord, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_constraint=False
    )
    content_hash = models.CharField(max_length=64)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "status", "created_at"], name="candidate_queue_idx"),
            models.Index(fields=["tenant", "subject", "namespace", "field"], name="candidate_key_idx"),
        ]


class Conflict(models.Model):
    """Two records that precedence cannot order (e.g. two approved org records disagree)."""

    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="conflicts", db_constraint=False)
    namespace = models.CharField(max_length=300)
    field = models.CharField(max_length=128)
    records: models.ManyToManyField[MemoryRecord, ConflictRecord] = models.ManyToManyField(
        MemoryRecord, related_name="conflicts", through="ConflictRecord")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    resolution = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)


class ConflictRecord(models.Model):
    """A record a conflict is about (``Conflict.records``), stored with the conflict's tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    conflict = models.ForeignKey(Conflict, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    memoryrecord = models.ForeignKey(MemoryRecord, on_delete=models.CASCADE, related_name="+", db_constraint=False)

    class Meta:
        db_table = "memory_conflict_records"
        constraints = [models.UniqueConstraint(fields=["conflict", "memoryrecord", "tenant"],
                                               name="conflict_record_unique")]


class AuditEntry(models.Model):
    """Who did what to which ids. Written in the same transaction as the change; holds no content."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                db_constraint=False)
    actor = models.CharField(max_length=64)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=32)
    object_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["tenant", "created_at"], name="audit_tenant_idx")]


class Tombstone(models.Model):
    """What remains of deleted content: keyed hashes only, enough to refuse a resurrection."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    subject_hash = models.CharField(max_length=64)
    memory_id = models.CharField(max_length=40, blank=True)
    namespace = models.CharField(max_length=300, blank=True)
    field = models.CharField(max_length=128, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    event_hashes = models.JSONField(default=list, blank=True)
    deleted_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "subject_hash", "content_hash"], name="tombstone_content_idx"),
        ]
