"""Operators' admin: read-mostly. Memory content changes and deletions go through services only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.contrib.auth import get_user_model
from django.http import HttpRequest

from memory.errors import EngramError
from memory.identity.services import agent_key_revoke, agent_key_rotate
from memory.models import (
    AgentKey,
    AuditEntry,
    Candidate,
    Conflict,
    Event,
    MemoryClass,
    MemoryRecord,
    Subject,
    Tenant,
    Tombstone,
)


class TenantLinksAdmin(admin.ModelAdmin):
    """Edits many-to-many fields whose link rows carry the tenant (distributed by it: memory/sharding.py).

    Django's admin leaves a many-to-many field with its own link model out of its forms, and the form's own save
    would write links without their tenant; so the form declares the field and the links are written here, with
    the parent row's tenant."""

    tenant_links: tuple[str, ...] = ()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        chosen = {name: form.cleaned_data.pop(name) for name in self.tenant_links if name in form.cleaned_data}
        super().save_related(request, form, formsets, change)
        for name, items in chosen.items():
            getattr(form.instance, name).set(items, through_defaults={"tenant_id": form.instance.tenant_id})


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, change or delete: rows are written by services, which enforce policy and audit."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["reviewers"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SubjectForm(forms.ModelForm):
    users = forms.ModelMultipleChoiceField(queryset=get_user_model().objects.all(), required=False,
                                           widget=FilteredSelectMultiple("users", is_stacked=False))

    class Meta:
        model = Subject
        fields = ["display_name", "kind", "users"]


@admin.register(Subject)
class SubjectAdmin(TenantLinksAdmin):
    form = SubjectForm
    tenant_links = ("users",)
    list_display = ["external_id", "display_name", "kind", "tenant", "created_at"]
    list_filter = ["kind", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["external_id", "display_name"]
    readonly_fields = ["tenant", "external_id", "created_at"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["tenant", "external_id", "display_name", "kind", "users", "created_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # subject erasure is DELETE /api/v1/subject (a tracked job)


@admin.register(MemoryClass)
class MemoryClassAdmin(admin.ModelAdmin):
    """Classes are policy as data and editable here (or replaced with manage.py load_policy)."""

    list_display = ["name", "namespace_prefix", "tenant", "model_permission", "sensitivity",
                    "encryption_required", "default_ttl", "max_retention"]
    list_filter = ["tenant", "model_permission", "sensitivity"]
    list_select_related = ["tenant"]
    raw_id_fields = ["tenant"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentKey)
class AgentKeyAdmin(ReadOnlyAdmin):
    """Keys are created with manage.py create_agent_key (the secret is shown once); here they are revoked or
    rotated, which takes effect on the next request and ends the principal tokens the key minted."""

    list_display = ["name", "prefix", "tenant", "permissions", "namespaces", "created_at", "revoked_at"]
    list_select_related = ["tenant"]
    list_filter = ["tenant"]
    exclude = ["key_hash"]
    actions = ["revoke", "rotate"]

    def _actor(self, request: HttpRequest) -> str:
        return f"user:{request.user.pk}"

    @admin.action(description="Revoke the selected keys (and the principal tokens they minted)")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        keys = [agent_key_revoke(key=key, actor=self._actor(request)) for key in queryset]
        self.message_user(request, f"Revoked {len(keys)} key(s): {', '.join(k.prefix for k in keys)}.",
                          messages.SUCCESS)

    @admin.action(description="Rotate the selected keys (new secrets shown once; old keys revoked now)")
    def rotate(self, request: HttpRequest, queryset: Any) -> None:
        for key in queryset:
            try:
                new, raw = agent_key_rotate(key=key, actor=self._actor(request))
            except EngramError as exc:
                self.message_user(request, f"{key.prefix}: {exc.detail}", messages.ERROR)
                continue
            # Shown once, like the command's output: only the hash is stored.
            self.message_user(request, f"{key.name} ({key.prefix}…) rotated; the new key is {raw} — copy it now, "
                                       "it is not shown again.", messages.WARNING)


@admin.register(MemoryRecord)
class MemoryRecordAdmin(ReadOnlyAdmin):
    list_display = ["id", "subject", "namespace", "field", "source_type", "confidence", "status", "created_at"]
    list_filter = ["status", "source_type", "confidence", "tenant"]
    list_select_related = ["subject"]
    search_fields = ["id", "namespace", "field"]
    exclude = ["embedding", "search_vector"]


@admin.register(Candidate)
class CandidateAdmin(ReadOnlyAdmin):
    list_display = ["id", "subject", "namespace", "field", "status", "created_at"]
    list_filter = ["status", "tenant"]
    list_select_related = ["subject"]
    exclude = ["embedding"]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["id", "external_id", "subject", "source_type", "created_at"]
    list_select_related = ["subject"]
    search_fields = ["id", "external_id"]


@admin.register(Conflict)
class ConflictAdmin(ReadOnlyAdmin):
    list_display = ["id", "subject", "namespace", "field", "status", "created_at"]
    list_select_related = ["subject"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor", "action", "object_type", "object_id", "tenant"]
    list_filter = ["action", "tenant"]
    search_fields = ["object_id", "actor"]


@admin.register(Tombstone)
class TombstoneAdmin(ReadOnlyAdmin):
    list_display = ["memory_id", "tenant", "namespace", "field", "deleted_at", "expires_at"]
