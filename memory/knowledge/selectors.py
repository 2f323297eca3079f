"""Reads of knowledge. Each asks the scope for ``read``; every query starts from the domains the scope may
read (access.py), in SQL."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from memory.errors import NotFound
from memory.knowledge.access import readable_domain_ids
from memory.knowledge.models import Chunk, Document
from memory.scope import READ, Scope


def documents_for_scope(*, scope: Scope) -> QuerySet[Document]:
    return Document.objects.filter(tenant_id=scope.tenant_id, access_domain_id__in=readable_domain_ids(scope))


def document_list(*, scope: Scope, access_domain: str | None = None) -> QuerySet[Document]:
    scope.require(READ)
    qs = documents_for_scope(scope=scope).select_related("access_domain").annotate(chunk_count=Count("chunks"))
    if access_domain:
        qs = qs.filter(access_domain__name=access_domain)
    return qs.order_by("-ingested_at", "-pk")


def document_get(*, scope: Scope, document_id: int) -> Document:
    scope.require(READ)
    document = (documents_for_scope(scope=scope).select_related("access_domain")
                .annotate(chunk_count=Count("chunks")).filter(pk=document_id).first())
    if document is None:
        # Same answer for "does not exist" and "belongs to a domain you cannot read".
        raise NotFound(f"No document '{document_id}' for this principal.")
    return document


def document_chunks(*, document: Document) -> QuerySet[Chunk]:
    return Chunk.objects.filter(document=document).order_by("ordinal")
