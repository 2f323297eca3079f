"""The retrieval log: what one retrieve call considered, kept, and dropped, and why.

A log names memory records by id, rank, score and reason, never by their text (readers are shown the
record's own text while it exists, "deleted" after), and never names a record that was already deleted
when the retrieve ran. What it can quote is the caller's query and the text of provider entries
(summaries, knowledge); the database keeps their lexemes in the GIN-indexed ``quotes`` column
(migration 0005), which deletion searches (memory/retrieval/deletion_surfaces.py). A log belongs to the
principal's subject and expires with the shortest retention of the memory classes it names.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField

from memory.ids import new_id


def new_retrieval_id() -> str:
    return new_id("ret")


class RetrievalLog(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_retrieval_id, editable=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey("memory.Subject", on_delete=models.CASCADE, related_name="retrieval_logs",
                                db_constraint=False)
    actor = models.CharField(max_length=64)
    agent_key_id = models.BigIntegerField(null=True, blank=True)
    query = models.TextField()
    # The request after validation and scope narrowing (namespaces, kinds, include, budget, limit).
    request = models.JSONField(default=dict)
    # One entry per candidate: {source, id, memory_id?, ranks, similarity, score, selected, reason}; provider
    # entries (no memory_id) also keep their text.
    candidates = models.JSONField(default=list)
    budget = models.JSONField(default=dict)
    dropped = models.JSONField(default=dict)
    timings_ms = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "subject", "created_at"], name="retrievallog_subject_idx")]

    def __str__(self) -> str:
        return self.id


class RecordContext(models.Model):
    """Derived, never the source of truth: an episodic record seen together with its neighbours.

    A conversation turn such as "Yes, every Sunday!" means little alone; with the turns around it, it
    is findable by what it answers. For each live episodic record, its *stream* is the subject's
    episodic records of the same namespace and kind in event-time order (``source.occurred_at``, else
    ``valid_from``), cut into sessions wherever two neighbours are more than SESSION_GAP apart; its
    *window* is up to WINDOW records before and after it in its session. ``terms`` holds the lexemes of
    the other records of the window (the lexical leg counts them at a fraction of the record's own),
    ``embedding`` the window's vector (its turns' own vectors averaged by their length in tokens, or the model's
    embedding of the whole window's text: ENGRAM_CONTEXT_VECTOR). Written by the worker after each write
    (memory/retrieval/context.py), rebuilt by ``manage.py reembed``, and purged by deletion together
    with every window that quoted a deleted record (``neighbours``).
    """

    record = models.OneToOneField("memory.MemoryRecord", on_delete=models.CASCADE, primary_key=True,
                                  related_name="+", db_constraint=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey("memory.Subject", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    # The ids of every record whose text is in this window (the record itself included), in order.
    neighbours = ArrayField(models.CharField(max_length=40), default=list)
    terms = SearchVectorField(null=True)
    embedding = VectorField(dimensions=384, null=True)
    # sha256 of the window's ids and texts: an unchanged window is not embedded again.
    window_hash = models.CharField(max_length=64)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "subject"], name="recordcontext_subject_idx"),
            GinIndex(fields=["neighbours"], name="recordcontext_neighbours_idx"),
        ]

    def __str__(self) -> str:
        return f"context of {self.record_id}"


class PendingContext(models.Model):
    """An episodic record whose context window (and its neighbours') is still to be derived.

    Written in the same transaction as the record, removed by the refresh that derives it: the count of these rows
    is the caught-up signal for context windows (``derived_pending`` in health). A record alone in its session
    legitimately has no window, so "records without a RecordContext" could never reach zero; this marker can.
    """

    record = models.OneToOneField("memory.MemoryRecord", on_delete=models.CASCADE, primary_key=True,
                                  related_name="+", db_constraint=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey("memory.Subject", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return f"context of {self.record_id} pending"


class PendingMaintenance(models.Model):
    """A subject whose own indexes or term statistics are due to be built, refreshed or dropped.

    Written when the maintenance task is queued, removed by the task that ran after it: health counts these rows
    (with the indexes not yet ready) instead of counting every subject's records on each call.
    """

    # Its database key is (subject_id, tenant_id), with a composite foreign key to the subject (migration 0009).
    subject = models.OneToOneField("memory.Subject", on_delete=models.CASCADE, primary_key=True, related_name="+",
                                   db_constraint=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    queued_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"maintenance of subject {self.subject_id} pending"


class SubjectIndex(models.Model):
    """A large subject's own search structures: partial indexes over its rows only, and its BM25 statistics.

    Below ``ENGRAM_SUBJECT_INDEX_THRESHOLD`` live records a subject is scored by an exact scan of its rows
    (memory/retrieval/candidates.py). Past it, the worker (memory/retrieval/subject_index.py) builds for this
    subject alone HNSW indexes on the records' and the context windows' embeddings and GIN indexes on their text
    vectors (``WHERE subject_id = S``), and writes its term statistics (TermBucket, TermCount). Retrieval reads them
    only while ``ready``; otherwise it scans exactly.
    """

    subject = models.OneToOneField("memory.Subject", on_delete=models.CASCADE, primary_key=True, related_name="+",
                                   db_constraint=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    # True once every partial index is valid and the statistics are written.
    ready = models.BooleanField(default=False)
    # The subject's records of any status when the statistics were computed: every write adds a row, so the
    # difference to the current count says how far the statistics may have drifted.
    rows = models.IntegerField(default=0)
    statistics_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"search index of subject {self.subject_id}"


class TermBucket(models.Model):
    """BM25 statistics of one subject's live, servable records of one namespace and memory class (derived).

    Kept per namespace and class because those are what a reader's namespace grant and the class's allowed readers
    select: a retrieve sums, in SQL, only the buckets its scope may read, so the statistics it scores with never
    count records it may not read. ``length`` is the sum of the records' lengths as the lexical leg counts them
    (own lexemes plus the context window's at CONTEXT_TERM_WEIGHT)."""

    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey("memory.Subject", on_delete=models.CASCADE, related_name="+", db_constraint=False)
    namespace = models.CharField(max_length=300)
    memory_class = models.ForeignKey("memory.MemoryClass", on_delete=models.CASCADE, related_name="+")
    records = models.IntegerField()
    length = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subject", "namespace", "memory_class", "tenant"],
                                               name="termbucket_unique")]

    def __str__(self) -> str:
        return f"{self.subject_id} {self.namespace} {self.memory_class_id}"


class TermCount(models.Model):
    """How many records of a bucket hold a lexeme in their own text or their context window (document frequency).

    Lexemes of live records only: deletion recomputes the subject's counts before its job completes
    (memory/retrieval/deletion_surfaces.py), so a deleted record's word stays here only while a live record also
    says it."""

    pk = models.CompositePrimaryKey("bucket", "lexeme", "tenant")
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    bucket = models.ForeignKey(TermBucket, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    lexeme = models.TextField()
    records = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.lexeme}: {self.records}"


class SubjectCentroid(models.Model):
    """Derived, never the source of truth: the direction a subject's record vectors share, and how close to it its
    records and its context windows lie on average.

    The turns of one person's conversations all sit near one direction (in LoCoMo the mean cosine of a turn with its
    subject's mean direction is 0.64): that of small talk between these two people. How close a record lies to it
    says how much of its similarity to any question is that shared part rather than what the question asks.
    Retrieval takes ``ENGRAM_RECALL_GENERIC`` of that closeness off each similarity, less the subject's average, so
    the scale the fusion's lines were set on stays (memory/retrieval/centroid.py). Written by the worker with the
    vectors it derives, in the same transaction; recomputed by deletion.
    """

    subject = models.OneToOneField("memory.Subject", on_delete=models.CASCADE, primary_key=True, related_name="+",
                                   db_constraint=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    # The mean of the live records' vectors, normalised, and the length of their sum.
    direction = VectorField(dimensions=384)
    total = models.FloatField()
    # The mean cosine of each live record's vector with the sum of the others', and of each window's with
    # ``direction``.
    record_similarity = models.FloatField()
    window_similarity = models.FloatField(default=0.0)
    # How many of each it was computed from: the difference to the current counts says how far it may have drifted.
    records = models.IntegerField()
    windows = models.IntegerField(default=0)
    # Vectors of the subject written since (records' and windows'): how far it may have drifted.
    changes = models.IntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"centroid of subject {self.subject_id}"
