"""Operators' view of thread state: read-only. Deletion goes through the deletion services."""

from __future__ import annotations

from django.contrib import admin

from memory.admin import ReadOnlyAdmin
from memory.threads.models import Checkpoint, Summary, Thread, ThreadEvent, ToolCall


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ["id", "tenant", "subject", "title", "last_seq", "updated_at"]
    list_select_related = ["tenant", "subject"]
    raw_id_fields = ["tenant", "subject"]
    search_fields = ["id"]


@admin.register(ThreadEvent)
class ThreadEventAdmin(ReadOnlyAdmin):
    list_display = ["id", "thread", "seq", "kind", "role", "status", "created_at"]
    list_filter = ["kind", "status"]
    raw_id_fields = ["tenant", "subject", "thread", "corrects"]
    search_fields = ["id", "thread__id"]


@admin.register(Summary)
class SummaryAdmin(ReadOnlyAdmin):
    list_display = ["id", "thread", "origin", "from_seq", "to_seq", "summarizer_name", "status", "created_at"]
    list_filter = ["origin", "status"]
    raw_id_fields = ["tenant", "subject", "thread", "replaced_by", "regenerates"]
    exclude = ["embedding", "search_vector"]


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ["workflow_id", "tenant", "subject", "version", "current_step", "updated_at"]
    list_select_related = ["tenant", "subject"]
    raw_id_fields = ["tenant", "subject", "thread"]
    search_fields = ["workflow_id"]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["workflow_id", "idempotency_key", "tool", "status", "tenant", "subject", "updated_at"]
    list_filter = ["status"]
    list_select_related = ["tenant", "subject"]
    raw_id_fields = ["tenant", "subject"]
    search_fields = ["workflow_id", "idempotency_key", "tool"]
