"""Knowledge: source documents (product docs, tickets, repository files) kept per access domain.

A document belongs to an access domain, not to a subject: who may read it is the domain's reader
list. Chunks are the retrievable units; their embedding and full-text vector are derived columns
rebuilt from the chunk text. There is deliberately no HNSW index on ``Chunk.embedding``: every
knowledge query is filtered by the principal's readable domains, and on pgvector 0.6 a filtered
HNSW scan under-fills (STACK_NOTES), so the semantic leg is an exact scan; without the index,
ingest stays fast (bulk inserts into an HNSW-indexed table ran at ~150 rows/s).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField

from memory.models import EMBEDDING_DIMENSIONS, Subject, Tenant


class AccessDomain(models.Model):
    """A corpus with its own readers.

    A subject reads the domain when any of these holds (see ``memory/knowledge/access.py``):
    ``all_subjects`` is set; the subject is listed in ``readers``; the subject's kind is in
    ``reader_kinds`` (the "groups of subjects": e.g. every ``project`` or every ``agent``).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="access_domains")
    name = models.CharField(max_length=64, help_text="Lowercase letters, digits, '_', '-', '.'.")
    description = models.TextField(blank=True)
    all_subjects = models.BooleanField(default=False, help_text="Every subject of the tenant may read it.")
    readers: models.ManyToManyField[Subject, AccessDomainReader] = models.ManyToManyField(
        Subject, related_name="access_domains", blank=True, through="AccessDomainReader")
    reader_kinds = ArrayField(
        models.CharField(max_length=16, choices=Subject.Kind.choices), default=list, blank=True,
        help_text="Subject kinds whose every subject may read it (user, project, agent, org).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="accessdomain_unique_name")]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.name}"


class AccessDomainReader(models.Model):
    """A subject listed as a reader of an access domain (``AccessDomain.readers``), stored with the subject's
    tenant: the domain is copied to every node, its reader list lives with the tenant's subjects."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    accessdomain = models.ForeignKey(AccessDomain, on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)

    class Meta:
        db_table = "knowledge_accessdomain_readers"
        constraints = [models.UniqueConstraint(fields=["accessdomain", "subject", "tenant"],
                                               name="accessdomain_reader_unique")]


class Document(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    access_domain = models.ForeignKey(AccessDomain, on_delete=models.PROTECT, related_name="documents")
    external_id = models.CharField(max_length=200, help_text="The caller's id, unique within the domain.")
    title = models.CharField(max_length=500)
    uri = models.CharField(max_length=2000, blank=True)
    mime_type = models.CharField(max_length=100, default="text/plain")
    # sha256 over what was posted (text, title, uri, mime type, metadata): equal hash = no-op re-post.
    content_hash = models.CharField(max_length=64)
    version = models.PositiveIntegerField(default=1)
    metadata = models.JSONField(default=dict, blank=True)
    char_count = models.PositiveIntegerField(default=0)
    ingested_at = models.DateTimeField(help_text="When the current version was stored.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["access_domain", "external_id", "tenant"],
                                    name="document_unique_external_id"),
        ]
        indexes = [models.Index(fields=["tenant", "access_domain", "-ingested_at"], name="document_list_idx")]

    def __str__(self) -> str:
        return f"{self.external_id} v{self.version}"


class Chunk(models.Model):
    # The document's tenant, copied: the distribution column on a tenant-sharded database (memory/sharding.py).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks", db_constraint=False)
    # Copied from the document so both retrieval legs filter chunks by domain without a join.
    access_domain = models.ForeignKey(AccessDomain, on_delete=models.CASCADE, related_name="+")
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    char_start = models.PositiveIntegerField(help_text="Span in the document's (converted) text.")
    char_end = models.PositiveIntegerField()
    token_count = models.PositiveIntegerField(default=0)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    search_vector = SearchVectorField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "ordinal", "tenant"], name="chunk_unique_ordinal")]
        indexes = [
            models.Index(fields=["access_domain"], name="chunk_domain_idx"),
            GinIndex(fields=["search_vector"], name="chunk_fts_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"
