"""Reads of the procedures area. Agents reach procedures only through ``procedures_for_scope``.

Visibility (decided here, in SQL): an ``org`` procedure is visible to every subject of its tenant;
a ``project`` procedure only to the subjects listed in its ``members``. A procedure with no
published version is invisible to agents. Reading needs the ``read`` scope (asked by each selector
below). Namespace grants of keys and tokens do not apply: procedures are the tenant's instructions
for its agents, not data about the subject.
"""

from __future__ import annotations

import difflib
from typing import TypedDict

from django.db.models import Exists, F, OuterRef, Q, QuerySet

from memory.content import unseal_text
from memory.errors import NotFound
from memory.models import Event
from memory.scope import READ, Scope
from procedures.models import ChangeProposal, Procedure, ProcedureVersion


def procedures_for_scope(scope: Scope) -> QuerySet[Procedure]:
    member = Procedure.members.through.objects.filter(procedure_id=OuterRef("pk"), subject_id=scope.subject_id)
    return (Procedure.objects.filter(tenant_id=scope.tenant_id, current_number__gt=0)
            .filter(Q(scope=Procedure.Scope.ORG) | Q(Exists(member))))


def visible_procedure(*, scope: Scope, name: str) -> Procedure:
    """The procedure ``name`` if the scope's subject may see it (404 otherwise). No permission of its
    own: reading it needs ``read`` (the selectors below), proposing a change ``propose`` (the service)."""
    procedure = procedures_for_scope(scope).filter(name=name).first()
    if procedure is None:
        raise NotFound(f"No procedure named '{name}'.")
    return procedure


def current_versions(scope: Scope) -> QuerySet[ProcedureVersion]:
    """The current version of every procedure the scope may read."""
    scope.require(READ)
    return (ProcedureVersion.objects.filter(procedure__in=procedures_for_scope(scope),
                                            number=F("procedure__current_number"))
            .select_related("procedure", "approved_by"))


def version_get(*, scope: Scope, name: str, number: int | None = None) -> ProcedureVersion:
    """Version ``number`` (the current one by default) of a procedure the scope may read."""
    scope.require(READ)
    procedure = visible_procedure(scope=scope, name=name)
    version = (ProcedureVersion.objects.select_related("procedure", "approved_by")
               .filter(procedure=procedure, number=procedure.current_number if number is None else number).first())
    if version is None:
        raise NotFound(f"Procedure '{name}' has no version {number}.")
    return version


def versions_list(*, scope: Scope, name: str) -> QuerySet[ProcedureVersion]:
    scope.require(READ)
    procedure = visible_procedure(scope=scope, name=name)
    return ProcedureVersion.objects.filter(procedure=procedure).select_related("approved_by").order_by("number")


def proposal_get(*, scope: Scope, name: str, proposal_id: str) -> ChangeProposal:
    """A proposal of the principal's own subject (another subject's proposal is a 404, like a missing one)."""
    scope.require(READ)
    procedure = visible_procedure(scope=scope, name=name)
    proposal = (ChangeProposal.objects.select_related("base_version", "procedure")
                .filter(pk=proposal_id, procedure=procedure, proposer_subject_id=scope.subject_id).first())
    if proposal is None:
        raise NotFound("No such proposal.")
    return proposal


def proposals_of(*, scope: Scope, name: str) -> QuerySet[ChangeProposal]:
    scope.require(READ)
    procedure = visible_procedure(scope=scope, name=name)
    return (ChangeProposal.objects.select_related("base_version", "procedure")
            .filter(procedure=procedure, proposer_subject_id=scope.subject_id).order_by("-created_at"))


# --- reviewer reads (the UI checks the reviewer's tenant first) -----------------------------------


def review_queue(tenant_ids: list[int]) -> QuerySet[ChangeProposal]:
    return (ChangeProposal.objects.filter(tenant_id__in=tenant_ids,
                                          status__in=[ChangeProposal.Status.PENDING, ChangeProposal.Status.STALE])
            .select_related("procedure", "base_version", "tenant").order_by("created_at"))


def tenant_procedures(tenant_ids: list[int]) -> QuerySet[Procedure]:
    return Procedure.objects.filter(tenant_id__in=tenant_ids).select_related("tenant").order_by("tenant__slug", "name")


def evidence_for(proposal: ChangeProposal) -> list[dict[str, str]]:
    """The source events' words (the proposer subject's events only), for the reviewer."""
    ids = [str(i) for i in proposal.source_event_ids][:50]
    if not ids or proposal.proposer_subject_id is None:
        return []
    events = Event.objects.filter(tenant_id=proposal.tenant_id, subject_id=proposal.proposer_subject_id).filter(
        Q(external_id__in=ids) | Q(pk__in=ids)).order_by("created_at")
    found = [{"event_id": e.external_id, "text": unseal_text(e.text), "at": e.created_at.isoformat()}
             for e in events]
    seen = {f["event_id"] for f in found}
    return found + [{"event_id": i, "text": "", "at": ""} for i in ids if i not in seen]


class DiffLine(TypedDict):
    op: str  # "add", "del", "ctx" or "hunk"
    text: str


def line_diff(old: str, new: str, context: int = 3) -> list[DiffLine]:
    lines: list[DiffLine] = []
    for raw in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context):
        if raw.startswith(("---", "+++")):
            continue
        if raw.startswith("@@"):
            lines.append(DiffLine(op="hunk", text=raw))
        elif raw.startswith("+"):
            lines.append(DiffLine(op="add", text=raw[1:]))
        elif raw.startswith("-"):
            lines.append(DiffLine(op="del", text=raw[1:]))
        else:
            lines.append(DiffLine(op="ctx", text=raw[1:]))
    return lines

