"""The reviewers' queue: GET renders, POST acts (access helper -> form -> service -> message -> redirect).

Every page works without JavaScript; with htmx a row's action returns just that row (_row.html).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from memory.consolidation import review as services
from memory.content import unseal_parts
from memory.errors import EngramError
from memory.identity.access import access_candidate, access_conflict, reviewer_may_read, reviewer_of
from memory.models import Candidate
from review.queue import AGES, candidate_item, conflict_item, pending_counts, queue_items

KEPT_CURRENT = "kept the current record"


class FilterForm(forms.Form):
    namespace = forms.CharField(required=False, max_length=300)
    kind = forms.CharField(required=False, max_length=64)
    age = forms.ChoiceField(required=False, choices=[("", "any age"), ("day", "last 24 hours"),
                                                     ("week", "last 7 days"), ("older", "older than 7 days")])
    type = forms.ChoiceField(required=False, choices=[("", "candidates and conflicts"),
                                                      ("candidate", "candidates"), ("conflict", "conflicts")])
    tenant = forms.CharField(required=False, max_length=64)


class RejectForm(forms.Form):
    reason = forms.CharField(max_length=services.MAX_REASON)


class EditForm(forms.Form):
    value = forms.CharField(max_length=2000)
    text = forms.CharField(max_length=4000, widget=forms.Textarea(attrs={"rows": 3, "cols": 70}))


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")])
    reason = forms.CharField(required=False, max_length=services.MAX_REASON)


def _back(request: HttpRequest) -> HttpResponse:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}) or \
            not target.startswith("/review/"):
        target = reverse("review-queue")
    return redirect(target)


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    filters = FilterForm(request.GET)
    data: dict[str, Any] = filters.cleaned_data if filters.is_valid() else {}
    reviewer = reviewer_of(request.user)
    items = queue_items(reviewer=reviewer, namespace=data.get("namespace") or None, kind=data.get("kind") or None,
                        age=data.get("age") or None, item_type=data.get("type") or None,
                        tenant=data.get("tenant") or None)
    return render(request, "review/queue/list.html", {
        "filters": filters, "items": items, "counts": pending_counts(reviewer=reviewer), "ages": AGES,
        "reviews_any": reviewer.reviews_any, "next": request.get_full_path(),
    })


def _done(request: HttpRequest, item_type: str, item_id: str, text: str, *, error: bool = False) -> HttpResponse:
    """The row again (htmx) or a redirect back to the queue with a message."""
    (messages.error if error else messages.success)(request, text)
    if getattr(request, "htmx", False):
        if item_type == "candidate":
            item = candidate_item(access_candidate(reviewer_of(request.user), item_id))
        else:
            item = conflict_item(access_conflict(reviewer_of(request.user), int(item_id)))
        return render(request, "review/queue/_row.html", {"item": item, "note": text, "error": error,
                                                           "next": request.POST.get("next", "")})
    return _back(request)


def _approval_text(approval: services.Approval) -> str:
    record = approval.result.record
    if approval.active:
        return f"Approved: {record.pk} is now the active record."
    decision = approval.result.decision
    return f"Approved, but {record.pk} is kept inactive: {decision.reason if decision else record.status_reason}."


def _approve(request: HttpRequest, candidate_id: str) -> HttpResponse:
    reviewer = reviewer_of(request.user)
    access_candidate(reviewer, candidate_id)
    try:
        approval = services.candidate_approve(reviewer=reviewer, candidate_id=candidate_id)
    except EngramError as exc:
        return _done(request, "candidate", candidate_id, exc.detail, error=True)
    return _done(request, "candidate", candidate_id, _approval_text(approval))


def _reject(request: HttpRequest, candidate_id: str, reason: str) -> HttpResponse:
    try:
        services.candidate_reject(reviewer=reviewer_of(request.user), candidate_id=candidate_id, reason=reason)
    except EngramError as exc:
        return _done(request, "candidate", candidate_id, exc.detail, error=True)
    return _done(request, "candidate", candidate_id, f"Rejected {candidate_id}.")


@login_required
@require_POST
def candidate_approve(request: HttpRequest, candidate_id: str) -> HttpResponse:
    return _approve(request, candidate_id)


@login_required
@require_POST
def candidate_reject(request: HttpRequest, candidate_id: str) -> HttpResponse:
    access_candidate(reviewer_of(request.user), candidate_id)
    form = RejectForm(request.POST)
    if not form.is_valid():
        return _done(request, "candidate", candidate_id, "Say why the candidate is rejected.", error=True)
    return _reject(request, candidate_id, form.cleaned_data["reason"])


@login_required
@require_POST
def candidate_keep_current(request: HttpRequest, candidate_id: str) -> HttpResponse:
    access_candidate(reviewer_of(request.user), candidate_id)
    return _reject(request, candidate_id, KEPT_CURRENT)


@login_required
@require_POST
def candidate_use_proposed(request: HttpRequest, candidate_id: str) -> HttpResponse:
    return _approve(request, candidate_id)


def _value_from(text: str, original: Any) -> Any:
    """Strings stay strings; a JSON value (number, list, object) is edited as JSON."""
    if isinstance(original, str) or original is None:
        return text
    return json.loads(text)


@login_required
def candidate_edit(request: HttpRequest, candidate_id: str) -> HttpResponse:
    """GET: the edit form. POST: edit and approve."""
    reviewer = reviewer_of(request.user)
    candidate = access_candidate(reviewer, candidate_id)
    if not reviewer_may_read(candidate.memory_class) or candidate.status != Candidate.Status.REVIEW:
        messages.error(request, "This candidate cannot be edited here.")
        return redirect("review-queue")
    fact, text = unseal_parts(candidate.fact, candidate.text)
    original = fact.get("value")
    initial = {"value": original if isinstance(original, str) else json.dumps(original), "text": text}
    form = EditForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            value = _value_from(form.cleaned_data["value"], original)
            approval = services.candidate_edit_approve(reviewer=reviewer, candidate_id=candidate_id,
                                                       value=value, text=form.cleaned_data["text"])
        except json.JSONDecodeError:
            form.add_error("value", "This value is JSON; enter valid JSON.")
        except EngramError as exc:
            form.add_error(None, exc.detail)
        else:
            messages.success(request, "Edited. " + _approval_text(approval))
            return redirect("review-queue")
    return render(request, "review/queue/edit.html", {"form": form, "item": candidate_item(candidate)})


@login_required
@require_POST
def conflict_keep_current(request: HttpRequest, conflict_id: int) -> HttpResponse:
    reviewer = reviewer_of(request.user)
    access_conflict(reviewer, conflict_id)
    try:
        services.conflict_keep_current(reviewer=reviewer, conflict_id=conflict_id)
    except EngramError as exc:
        return _done(request, "conflict", str(conflict_id), exc.detail, error=True)
    return _done(request, "conflict", str(conflict_id), "Kept the current record.")


@login_required
@require_POST
def conflict_use_proposed(request: HttpRequest, conflict_id: int) -> HttpResponse:
    reviewer = reviewer_of(request.user)
    access_conflict(reviewer, conflict_id)
    try:
        services.conflict_use_proposed(reviewer=reviewer, conflict_id=conflict_id)
    except EngramError as exc:
        return _done(request, "conflict", str(conflict_id), exc.detail, error=True)
    return _done(request, "conflict", str(conflict_id), "Used the proposed record.")


@login_required
@require_POST
def bulk(request: HttpRequest) -> HttpResponse:
    form = BulkForm(request.POST)
    ids = request.POST.getlist("ids")
    if not form.is_valid() or not ids:
        messages.error(request, "Select items and an action.")
        return _back(request)
    if form.cleaned_data["action"] == "approve":
        result = services.candidates_bulk_approve(reviewer=reviewer_of(request.user), candidate_ids=ids)
    else:
        if not form.cleaned_data["reason"].strip():
            messages.error(request, "Say why the selected candidates are rejected.")
            return _back(request)
        result = services.candidates_bulk_reject(reviewer=reviewer_of(request.user), candidate_ids=ids,
                                                 reason=form.cleaned_data["reason"])
    verb = "Approved" if form.cleaned_data["action"] == "approve" else "Rejected"
    if result.done:
        messages.success(request, f"{verb} {len(result.done)} item(s).")
    for candidate_id, detail in result.failed.items():
        messages.error(request, f"{candidate_id}: {detail}")
    return _back(request)
