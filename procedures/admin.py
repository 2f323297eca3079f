"""Read-only admin: operators may look; versions are immutable and decisions go through the review UI."""

from __future__ import annotations

from django.contrib import admin

from memory.admin import ReadOnlyAdmin
from procedures.models import ChangeProposal, Procedure, ProcedureVersion


@admin.register(Procedure)
class ProcedureAdmin(ReadOnlyAdmin):
    list_display = ("name", "tenant", "scope", "current_number", "created_at")
    list_filter = ("scope",)
    list_select_related = ("tenant",)
    search_fields = ("name",)
    raw_id_fields = ("tenant", "owner")
    # Shown, not edited: the admin leaves out a many-to-many field with its own link model (rows with a tenant).
    readonly_fields = ("members",)


@admin.register(ProcedureVersion)
class ProcedureVersionAdmin(ReadOnlyAdmin):
    list_display = ("procedure", "number", "approved_by", "approved_at")
    list_select_related = ("procedure", "approved_by")
    raw_id_fields = ("procedure", "approved_by", "proposal")
    exclude = ("search_vector",)


@admin.register(ChangeProposal)
class ChangeProposalAdmin(ReadOnlyAdmin):
    list_display = ("id", "procedure", "status", "proposer", "created_at")
    list_filter = ("status",)
    list_select_related = ("procedure",)
    raw_id_fields = ("tenant", "procedure", "base_version", "proposer_subject", "proposer_user", "decided_by",
                     "rebased_from")
