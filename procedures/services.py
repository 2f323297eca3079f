"""Writes of the procedures area. Publishing is the only way a version is created.

A version is published by a reviewer of the procedure's tenant (the checked caller, a ``Reviewer`` from
memory/identity/access.py): by approving a proposal
(``proposal_approve``) or, to bootstrap, with ``procedure_publish`` (``manage.py publish_procedure``).
There is no service that updates or deletes a version, and none that an agent key can reach
to create one: agents may only propose (``proposal_create`` with the propose scope).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from memory.audit import audit
from memory.errors import Conflict, Forbidden, InvalidInput, NotFound
from memory.identity.access import Reviewer
from memory.models import Subject, Tenant
from memory.namespaces import NAME
from memory.policy.secrets import refuse_secrets
from memory.scope import PROPOSE, Scope
from procedures.flags import flags_for
from procedures.models import ChangeProposal, Procedure, ProcedureVersion

MAX_BODY_CHARS = 50_000


def _require_reviewer(*, tenant_id: int, reviewer: Reviewer) -> None:
    if not reviewer.reviews(tenant_id):
        raise Forbidden("Only a reviewer of the tenant may publish or decide procedure changes.",
                        code="not_a_reviewer")


def _check_body(body: str) -> str:
    if not body.strip():
        raise InvalidInput("A procedure body cannot be empty.", code="empty_body")
    if len(body) > MAX_BODY_CHARS:
        raise InvalidInput(f"A procedure body is at most {MAX_BODY_CHARS} characters.")
    # Procedures are served to every agent of the tenant: a secret in one would be stored and spread.
    refuse_secrets({"body": body})
    return body


def _version_create(*, procedure: Procedure, body: str, author: str, reviewer: Reviewer,
                    change_summary: str, proposal: ChangeProposal | None) -> ProcedureVersion:
    """Version n+1. The caller holds select_for_update on ``procedure``."""
    version = ProcedureVersion.objects.create(
        tenant_id=procedure.tenant_id, procedure=procedure, number=procedure.current_number + 1, body=body,
        author=author, approved_by_id=reviewer.user_id, approved_at=timezone.now(),
        change_summary=change_summary[:500], proposal=proposal,
    )
    Procedure.objects.filter(pk=procedure.pk).update(current_number=version.number)
    procedure.current_number = version.number
    # Every other open proposal was written against a base that is no longer current.
    stale = list(ChangeProposal.objects.filter(procedure=procedure, status=ChangeProposal.Status.PENDING)
                 .exclude(pk=proposal.pk if proposal else None).values_list("pk", flat=True))
    if stale:
        ChangeProposal.objects.filter(pk__in=stale).update(status=ChangeProposal.Status.STALE)
    audit(actor=reviewer.actor, action="procedure.publish", object_type="procedure_version",
          object_id=str(version.pk), tenant_id=procedure.tenant_id,
          data={"procedure": procedure.name, "number": version.number,
                "proposal": proposal.pk if proposal else None, "marked_stale": stale})
    return version


@transaction.atomic
def procedure_publish(*, tenant: Tenant, name: str, body: str, reviewer: Reviewer,
                      change_summary: str = "", scope: str = Procedure.Scope.ORG,
                      members: Sequence[str] = ()) -> ProcedureVersion:
    """Bootstrap path (operators): publish ``body`` as the next version, creating the procedure if needed."""
    _require_reviewer(tenant_id=tenant.pk, reviewer=reviewer)
    if not NAME.match(name):
        raise InvalidInput("A procedure name is 1-64 lowercase letters, digits, '_', '-' or '.'.")
    if scope not in Procedure.Scope.values:
        raise InvalidInput(f"scope is one of {', '.join(Procedure.Scope.values)}.")
    procedure, created = Procedure.objects.get_or_create(tenant=tenant, name=name,
                                                         defaults={"scope": scope, "owner_id": reviewer.user_id})
    # Lock the procedure row: the same race as two approvals (see proposal_approve).
    procedure = Procedure.objects.select_for_update().get(pk=procedure.pk)
    if members:
        subjects = list(Subject.objects.filter(tenant=tenant, external_id__in=list(members)))
        missing = sorted(set(members) - {s.external_id for s in subjects})
        if missing:
            raise InvalidInput(f"Unknown subject(s) in this tenant: {', '.join(missing)}.")
        procedure.members.add(*subjects, through_defaults={"tenant_id": tenant.pk})
    if created:
        audit(actor=reviewer.actor, action="procedure.create", object_type="procedure",
              object_id=str(procedure.pk), tenant_id=tenant.pk, data={"name": name, "scope": scope})
    return _version_create(procedure=procedure, body=_check_body(body), author=reviewer.actor,
                           reviewer=reviewer, change_summary=change_summary or "Published by an operator.",
                           proposal=None)


@transaction.atomic
def proposal_create(*, procedure: Procedure, body: str, rationale: str = "", base_number: int | None = None,
                    source_event_ids: Sequence[str] = (), scope: Scope | None = None,
                    reviewer: Reviewer | None = None, rebased_from: ChangeProposal | None = None) -> ChangeProposal:
    """A proposed next version, by an agent (``scope``, needs the propose scope) or a reviewer (``reviewer``).

    A proposal against a base that is not the current version is stored as stale at once.
    """
    if scope is not None:
        scope.require(PROPOSE)
    if (scope is None) == (reviewer is None):
        raise InvalidInput("A proposal comes from exactly one agent scope or one person.")
    current = procedure.current_number
    base_number = current if base_number is None else base_number
    base = ProcedureVersion.objects.filter(procedure=procedure, number=base_number).first()
    if base is None:
        raise NotFound(f"Version {base_number} of procedure '{procedure.name}' does not exist.",
                       code="base_version_not_found")
    refuse_secrets({"rationale": rationale, "source_event_ids": list(source_event_ids)})
    status = ChangeProposal.Status.PENDING if base_number == current else ChangeProposal.Status.STALE
    proposal = ChangeProposal.objects.create(
        tenant_id=procedure.tenant_id, procedure=procedure, base_version=base, body=_check_body(body),
        rationale=rationale, source_event_ids=list(source_event_ids), status=status,
        proposer=scope.actor if scope else reviewer.actor,  # type: ignore[union-attr]
        proposer_subject_id=scope.subject_id if scope else None,
        proposer_user_id=reviewer.user_id if reviewer else None, rebased_from=rebased_from,
        flags=flags_for(base_body=base.body, proposed_body=body, rationale=rationale),
    )
    audit(actor=proposal.proposer, action="procedure.propose", object_type="change_proposal",
          object_id=proposal.pk, tenant_id=procedure.tenant_id, subject_id=proposal.proposer_subject_id,
          data={"procedure": procedure.name, "base": base_number, "status": status,
                "flags": [f["code"] for f in proposal.flags],
                "rebased_from": rebased_from.pk if rebased_from else None})
    return proposal


def _locked(proposal_id: str, tenant_id: int) -> tuple[Procedure, ChangeProposal]:
    proposal = ChangeProposal.objects.filter(pk=proposal_id, tenant_id=tenant_id).first()
    if proposal is None:
        raise NotFound("No such proposal.")
    # Race: two reviewers approving two proposals on the same base. Both lock the procedure row
    # first, so the second one waits, then re-reads its proposal: the first publish marked it stale.
    procedure = Procedure.objects.select_for_update().get(pk=proposal.procedure_id)
    return procedure, ChangeProposal.objects.select_for_update().get(pk=proposal.pk)


def _decide_audit(reviewer: Reviewer, proposal: ChangeProposal, action: str, **data: object) -> None:
    audit(actor=reviewer.actor, action=action, object_type="change_proposal", object_id=proposal.pk,
          tenant_id=proposal.tenant_id, data={"procedure_id": proposal.procedure_id, **data})


@transaction.atomic
def proposal_approve(*, tenant_id: int, proposal_id: str, reviewer: Reviewer,
                     change_summary: str = "") -> ProcedureVersion:
    """Publish the proposal as version n+1. Refused unless it is pending and its base is current."""
    _require_reviewer(tenant_id=tenant_id, reviewer=reviewer)
    procedure, proposal = _locked(proposal_id, tenant_id)
    if proposal.status == ChangeProposal.Status.STALE:
        raise Conflict("This proposal's base version is no longer current: rebase it or reject it.",
                       code="proposal_stale")
    if proposal.status != ChangeProposal.Status.PENDING:
        raise Conflict(f"This proposal is already {proposal.status}.", code="proposal_decided")
    if proposal.base_version.number != procedure.current_number:  # defensive: publish marks these stale
        ChangeProposal.objects.filter(pk=proposal.pk).update(status=ChangeProposal.Status.STALE)
        raise Conflict("This proposal's base version is no longer current.", code="proposal_stale")
    now = timezone.now()
    ChangeProposal.objects.filter(pk=proposal.pk).update(status=ChangeProposal.Status.APPROVED,
                                                         decided_by_id=reviewer.user_id, decided_at=now)
    _decide_audit(reviewer, proposal, "procedure.proposal.approve", flags=[f["code"] for f in proposal.flags])
    return _version_create(procedure=procedure, body=proposal.body, author=proposal.proposer, reviewer=reviewer,
                           change_summary=change_summary or proposal.rationale, proposal=proposal)


@transaction.atomic
def proposal_reject(*, tenant_id: int, proposal_id: str, reviewer: Reviewer, reason: str) -> ChangeProposal:
    _require_reviewer(tenant_id=tenant_id, reviewer=reviewer)
    if not reason.strip():
        raise InvalidInput("Give a reason for the rejection.", code="reason_required")
    _, proposal = _locked(proposal_id, tenant_id)
    if proposal.status not in (ChangeProposal.Status.PENDING, ChangeProposal.Status.STALE):
        raise Conflict(f"This proposal is already {proposal.status}.", code="proposal_decided")
    ChangeProposal.objects.filter(pk=proposal.pk).update(
        status=ChangeProposal.Status.REJECTED, decided_by_id=reviewer.user_id, decided_at=timezone.now(),
        decision_reason=reason[:500])
    _decide_audit(reviewer, proposal, "procedure.proposal.reject", previous_status=proposal.status)
    proposal.refresh_from_db()
    return proposal


@transaction.atomic
def proposal_rebase(*, tenant_id: int, proposal_id: str, reviewer: Reviewer) -> ChangeProposal:
    """A stale proposal's body as a new pending proposal on the current version (flags re-computed).

    The old proposal is closed as rejected ("rebased"); the new one keeps its proposer, rationale and
    evidence, and is reviewed like any other.
    """
    _require_reviewer(tenant_id=tenant_id, reviewer=reviewer)
    procedure, proposal = _locked(proposal_id, tenant_id)
    if proposal.status != ChangeProposal.Status.STALE:
        raise Conflict("Only a stale proposal can be rebased.", code="proposal_not_stale")
    base = ProcedureVersion.objects.get(procedure=procedure, number=procedure.current_number)
    rebased = ChangeProposal.objects.create(
        tenant_id=tenant_id, procedure=procedure, base_version=base, body=proposal.body,
        rationale=proposal.rationale, source_event_ids=proposal.source_event_ids, proposer=proposal.proposer,
        proposer_subject_id=proposal.proposer_subject_id, proposer_user_id=proposal.proposer_user_id,
        rebased_from=proposal, flags=flags_for(base_body=base.body, proposed_body=proposal.body,
                                               rationale=proposal.rationale),
    )
    ChangeProposal.objects.filter(pk=proposal.pk).update(
        status=ChangeProposal.Status.REJECTED, decided_by_id=reviewer.user_id, decided_at=timezone.now(),
        decision_reason=f"Rebased onto version {base.number} as {rebased.pk}.")
    _decide_audit(reviewer, proposal, "procedure.proposal.rebase", new_proposal=rebased.pk, base=base.number)
    return rebased


@transaction.atomic
def rollback_propose(*, tenant_id: int, procedure_id: int, number: int, reviewer: Reviewer) -> ChangeProposal:
    """Rollback = a proposal whose body is an earlier version's, reviewed like any other."""
    _require_reviewer(tenant_id=tenant_id, reviewer=reviewer)
    procedure = Procedure.objects.filter(pk=procedure_id, tenant_id=tenant_id).first()
    old = ProcedureVersion.objects.filter(procedure=procedure, number=number).first() if procedure else None
    if procedure is None or old is None:
        raise NotFound("No such version.")
    if number == procedure.current_number:
        raise Conflict("That version is already current.", code="already_current")
    return proposal_create(procedure=procedure, body=old.body, reviewer=reviewer,
                           rationale=f"Rollback to version {number}.")


@transaction.atomic
def write_refused(*, tenant_id: int, actor: str, method: str, path: str, name: str | None) -> None:
    """Record an attempt to publish, edit or delete through the API (it is always refused)."""
    audit(actor=actor, action="procedure.write_refused", object_type="procedure", object_id=name or "",
          tenant_id=tenant_id, data={"method": method, "path": path[:300]})
