"""Operators' admin for knowledge: access domains are managed here; documents and chunks are read-only
(ingest and deletion go through the services, which scan for secrets, version, audit and purge)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from memory.admin import ReadOnlyAdmin, TenantLinksAdmin
from memory.knowledge.models import AccessDomain, Chunk, Document
from memory.models import Subject


class AccessDomainForm(forms.ModelForm):
    readers = forms.ModelMultipleChoiceField(queryset=Subject.objects.all(), required=False,
                                             widget=FilteredSelectMultiple("readers", is_stacked=False))

    class Meta:
        model = AccessDomain
        fields = ["tenant", "name", "description", "all_subjects", "readers", "reader_kinds"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        tenant = data.get("tenant") or getattr(self.instance, "tenant", None)
        foreign = [s for s in data.get("readers") or [] if tenant is not None and s.tenant_id != tenant.pk]
        if foreign:
            # Harmless in SQL (every read also checks the tenant) but always a mistake.
            raise forms.ValidationError("Readers must be subjects of the domain's tenant: "
                                        + ", ".join(s.external_id for s in foreign))
        return data


@admin.register(AccessDomain)
class AccessDomainAdmin(TenantLinksAdmin):
    form = AccessDomainForm
    tenant_links = ("readers",)
    list_display = ["name", "tenant", "all_subjects", "reader_kinds", "created_at"]
    list_filter = ["tenant", "all_subjects"]
    list_select_related = ["tenant"]
    search_fields = ["name"]
    raw_id_fields = ["tenant"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # The name is how agents and documents refer to the domain; renaming would orphan grants.
        return ["tenant", "name", "created_at"] if obj else ["created_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a domain with documents is protected; delete its documents through the API


@admin.register(Document)
class DocumentAdmin(ReadOnlyAdmin):
    list_display = ["external_id", "title", "access_domain", "version", "chunk_count", "ingested_at"]
    list_filter = ["tenant", "access_domain"]
    list_select_related = ["access_domain"]
    search_fields = ["external_id", "title"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return super().get_queryset(request).annotate(chunk_count=Count("chunks"))

    @admin.display(description="chunks")
    def chunk_count(self, obj: Document) -> int:
        return int(getattr(obj, "chunk_count", 0))


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ["document", "ordinal", "char_start", "char_end", "token_count"]
    list_select_related = ["document"]
    raw_id_fields = ["document"]
    exclude = ["embedding", "search_vector"]
