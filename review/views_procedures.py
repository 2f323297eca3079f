"""/review/procedures/: reviewers diff, approve, reject and rebase procedure proposals; version history.

Access: the reviewer permission is per tenant (``Tenant.reviewers``). Every page and action loads
its object through ``access_proposal`` / ``access_procedure`` (procedures/access.py, on the people's
gate), so another tenant's reviewer gets the same 404 as for an id that does not exist. Anonymous
visitors are sent to the login page.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from memory.errors import EngramError
from memory.identity.access import reviewer_of
from procedures.access import access_procedure, access_proposal
from procedures.models import ChangeProposal, Procedure, ProcedureVersion
from procedures.selectors import evidence_for, line_diff, review_queue, tenant_procedures
from procedures.services import proposal_approve, proposal_rebase, proposal_reject, rollback_propose

# --- access (memory/identity/access.py, procedures/access.py) ------------------------------------


def _proposal(request: HttpRequest, proposal_id: str) -> ChangeProposal:
    return access_proposal(reviewer_of(request.user), proposal_id)


def _procedure(request: HttpRequest, procedure_id: int) -> Procedure:
    return access_procedure(reviewer_of(request.user), procedure_id)


def _current(procedure: Procedure) -> ProcedureVersion | None:
    return ProcedureVersion.objects.filter(procedure=procedure, number=procedure.current_number).first()


# --- pages ----------------------------------------------------------------------------------------


@login_required
def procedures_home(request: HttpRequest) -> HttpResponse:
    tenant_ids = sorted(reviewer_of(request.user).tenant_ids)
    return render(request, "review/procedures/index.html", {
        "queue": list(review_queue(tenant_ids)),
        "procedures": list(tenant_procedures(tenant_ids)),
        "is_reviewer": bool(tenant_ids),
    })


@login_required
def proposal_detail(request: HttpRequest, proposal_id: str) -> HttpResponse:
    proposal = _proposal(request, proposal_id)
    current = _current(proposal.procedure)
    return render(request, "review/procedures/proposal.html", {
        "proposal": proposal, "procedure": proposal.procedure, "current": current,
        "diff": line_diff(proposal.base_version.body, proposal.body),
        "evidence": evidence_for(proposal), "reject_form": RejectForm(),
        "rebased_into": list(proposal.rebased_into.all()),
    })


@login_required
def proposal_rebase_view(request: HttpRequest, proposal_id: str) -> HttpResponse:
    """A stale proposal against the *current* version: what approving it now would change."""
    proposal = _proposal(request, proposal_id)
    current = _current(proposal.procedure)
    if proposal.status != ChangeProposal.Status.STALE or current is None:
        return redirect("procedure-proposal", proposal_id=proposal.pk)
    return render(request, "review/procedures/rebase.html", {
        "proposal": proposal, "procedure": proposal.procedure, "current": current,
        "diff": line_diff(current.body, proposal.body),
        "base_to_current": line_diff(proposal.base_version.body, current.body),
        "reject_form": RejectForm(),
    })


class ApproveForm(forms.Form):
    change_summary = forms.CharField(max_length=500, required=False)


class RejectForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 50}))


def _fail(request: HttpRequest, exc: EngramError) -> None:
    messages.error(request, exc.detail)


@login_required
@require_POST
def proposal_approve_view(request: HttpRequest, proposal_id: str) -> HttpResponse:
    proposal = _proposal(request, proposal_id)
    form = ApproveForm(request.POST)
    if form.is_valid():
        try:
            version = proposal_approve(tenant_id=proposal.tenant_id, proposal_id=proposal.pk,
                                       reviewer=reviewer_of(request.user),
                                       change_summary=form.cleaned_data["change_summary"])
        except EngramError as exc:
            _fail(request, exc)
        else:
            messages.success(request, f"Published {proposal.procedure.name} version {version.number}.")
            return redirect("procedure-history", procedure_id=proposal.procedure_id)
    return redirect("procedure-proposal", proposal_id=proposal.pk)


@login_required
@require_POST
def proposal_reject_view(request: HttpRequest, proposal_id: str) -> HttpResponse:
    proposal = _proposal(request, proposal_id)
    form = RejectForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give a reason for the rejection.")
        return redirect("procedure-proposal", proposal_id=proposal.pk)
    try:
        proposal_reject(tenant_id=proposal.tenant_id, proposal_id=proposal.pk, reviewer=reviewer_of(request.user),
                        reason=form.cleaned_data["reason"])
    except EngramError as exc:
        _fail(request, exc)
        return redirect("procedure-proposal", proposal_id=proposal.pk)
    messages.success(request, f"Rejected proposal {proposal.pk}.")
    return redirect("procedures-review")


@login_required
@require_POST
def proposal_rebase_action(request: HttpRequest, proposal_id: str) -> HttpResponse:
    proposal = _proposal(request, proposal_id)
    try:
        rebased = proposal_rebase(tenant_id=proposal.tenant_id, proposal_id=proposal.pk,
                                  reviewer=reviewer_of(request.user))
    except EngramError as exc:
        _fail(request, exc)
        return redirect("procedure-proposal", proposal_id=proposal.pk)
    messages.success(request, f"Rebased onto version {rebased.base_version.number}: review the new proposal.")
    return redirect("procedure-proposal", proposal_id=rebased.pk)


@login_required
def procedure_history(request: HttpRequest, procedure_id: int) -> HttpResponse:
    procedure = _procedure(request, procedure_id)
    versions = list(ProcedureVersion.objects.filter(procedure=procedure).select_related("approved_by", "proposal")
                    .order_by("-number"))
    proposals = list(procedure.proposals.select_related("base_version", "decided_by").order_by("-created_at")[:50])
    return render(request, "review/procedures/history.html",
                  {"procedure": procedure, "versions": versions, "proposals": proposals})


@login_required
def version_detail(request: HttpRequest, procedure_id: int, number: int) -> HttpResponse:
    procedure = _procedure(request, procedure_id)
    version = ProcedureVersion.objects.filter(procedure=procedure, number=number).select_related("approved_by").first()
    if version is None:
        raise Http404("Not found.")
    current = _current(procedure)
    return render(request, "review/procedures/version.html", {
        "procedure": procedure, "version": version, "current": current,
        "diff_to_current": line_diff(version.body, current.body) if current and current != version else [],
    })


@login_required
@require_POST
def version_rollback(request: HttpRequest, procedure_id: int, number: int) -> HttpResponse:
    procedure = _procedure(request, procedure_id)
    try:
        proposal = rollback_propose(tenant_id=procedure.tenant_id, procedure_id=procedure.pk, number=number,
                                    reviewer=reviewer_of(request.user))
    except EngramError as exc:
        _fail(request, exc)
        return redirect("procedure-history", procedure_id=procedure.pk)
    messages.success(request, f"Rollback to version {number} proposed: review and approve it to publish.")
    return redirect("procedure-proposal", proposal_id=proposal.pk)
