"""/me/: a logged-in person's own memories: list with provenance, history, correct, delete, export, erase.

A person sees only the subjects they are linked to (Subject.users). Every read goes through the
scoped query with ``reader_role="owner"``, so the memory class's "allowed readers" decides in SQL;
a reviewer's permission plays no part here.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from memory.content import unseal, unseal_text
from memory.deletion.export import export_json
from memory.deletion.presenters import job_payload
from memory.deletion.selectors import deletion_for_user
from memory.deletion.services import memory_delete, subject_erase
from memory.errors import EngramError
from memory.models import MemoryRecord, RecordStatus, Subject
from memory.records.selectors import effective_status, memory_get, memory_history, memory_list
from memory.records.services import memory_correct
from memory.scope import Scope
from memory.tombstones import subject_hash

ERASE_PHRASE = "delete everything"


# --- access helpers -------------------------------------------------------------------------------


def _subjects(request: HttpRequest) -> list[Subject]:
    mine = Subject.objects.filter(users__pk=int(request.user.pk or 0))
    return list(mine.select_related("tenant").order_by("tenant__slug", "pk"))


def _subject(request: HttpRequest) -> Subject:
    """The subject picked by ?subject= (or the form's subject), among the person's own; else their first."""
    subjects = _subjects(request)
    wanted = request.POST.get("subject") or request.GET.get("subject")
    if wanted:
        for s in subjects:
            if str(s.pk) == wanted:
                return s
        raise Http404("No such subject.")
    if not subjects:
        raise Http404("Your account is not linked to any memories.")
    return subjects[0]


def person_scope(request: HttpRequest, subject: Subject) -> Scope:
    user_pk = request.user.pk
    return Scope(tenant_id=subject.tenant_id, subject_id=subject.pk, subject_external_id=subject.external_id,
                 permissions=frozenset({"read", "write"}), namespaces=None, actor=f"user:{user_pk}",
                 user_id=user_pk, reader_role="owner")


def _record(request: HttpRequest, memory_id: str) -> tuple[Subject, Scope, MemoryRecord]:
    """The record among the person's subjects, or 404 (the same for missing and someone else's)."""
    for subject in _subjects(request):
        scope = person_scope(request, subject)
        try:
            return subject, scope, memory_get(scope=scope, memory_id=memory_id)
        except EngramError:
            continue
    raise Http404("No such memory.")


def _row(record: MemoryRecord) -> dict[str, Any]:
    fact, text = unseal(record)
    event = record.source_event
    owner_may_read = "owner" in (record.memory_class.allowed_readers or [])
    return {
        "id": record.pk, "namespace": record.namespace, "field": record.field, "value": fact.get("value"),
        "text": text, "status": effective_status(record), "confidence": record.confidence,
        "source_type": record.source_type, "memory_class": record.memory_class.name,
        "event_date": (event.occurred_at or event.created_at) if event else None,
        "event_text": unseal_text(event.text) if event and owner_may_read else "",
        "created_at": record.created_at, "valid_until": record.valid_until,
    }


# --- pages ----------------------------------------------------------------------------------------


@login_required
def me_home(request: HttpRequest) -> HttpResponse:
    subjects = _subjects(request)
    if not subjects:
        return render(request, "review/me/index.html", {"subjects": [], "groups": {}})
    subject = _subject(request)
    records = memory_list(scope=person_scope(request, subject)).exclude(status=RecordStatus.DELETED)
    groups: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    for record in sorted(records, key=lambda r: (r.namespace, r.field, -r.created_at.timestamp())):
        groups.setdefault(record.namespace, []).append(_row(record))
    return render(request, "review/me/index.html", {"subjects": subjects, "subject": subject, "groups": groups})


@login_required
def me_history(request: HttpRequest, memory_id: str) -> HttpResponse:
    subject, scope, record = _record(request, memory_id)
    chain = [_row(r) for r in memory_history(scope=scope, memory_id=memory_id)]
    return render(request, "review/me/history.html", {"subject": subject, "record": _row(record), "chain": chain})


class CorrectForm(forms.Form):
    value = forms.CharField(max_length=2000, label="Correct value")
    text = forms.CharField(max_length=4000, required=False, label="Sentence (optional)")


@login_required
def me_correct(request: HttpRequest, memory_id: str) -> HttpResponse:
    subject, scope, record = _record(request, memory_id)
    form = CorrectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = memory_correct(scope=scope, memory_id=memory_id, value=form.cleaned_data["value"],
                                    text=form.cleaned_data["text"],
                                    event_text="Corrected on the My memories page.")
        except EngramError as exc:
            messages.error(request, exc.detail)
        else:
            messages.success(request, f"Corrected: the new memory {result.record.pk} replaces the old one.")
            return redirect(f"{reverse('me')}?subject={subject.pk}")
    return render(request, "review/me/correct.html", {"subject": subject, "record": _row(record), "form": form})


@login_required
def me_delete(request: HttpRequest, memory_id: str) -> HttpResponse:
    """GET: the confirmation. POST: queue the deletion and show its live status."""
    subject, scope, record = _record(request, memory_id)
    if request.method != "POST":
        return render(request, "review/me/delete.html", {"subject": subject, "record": _row(record)})
    job = memory_delete(scope=scope, memory_id=memory_id)
    messages.success(request, "Deletion started. It is complete when every step below is done.")
    return redirect("me-deletion", deletion_id=job.pk)


@login_required
def me_deletion(request: HttpRequest, deletion_id: str) -> HttpResponse:
    hashes = [subject_hash(s.tenant_id, s.external_id) for s in _subjects(request)]
    try:
        job = deletion_for_user(user_id=int(request.user.pk or 0), deletion_id=deletion_id, subject_hashes=hashes)
    except EngramError as exc:
        raise Http404("No such deletion.") from exc
    context = {"job": job_payload(job), "finished": job.status in ("completed", "failed")}
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "review/me/_deletion_steps.html", context)
    return render(request, "review/me/deletion.html", context)


@login_required
def me_export(request: HttpRequest) -> HttpResponse:
    subject = _subject(request)
    response = HttpResponse(export_json(scope=person_scope(request, subject)), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="my-memories-{subject.pk}.json"'
    return response


class EraseForm(forms.Form):
    confirm = forms.CharField(max_length=100, label=f'Type "{ERASE_PHRASE}" to confirm')

    def clean_confirm(self) -> str:
        value = self.cleaned_data["confirm"].strip().lower()
        if value != ERASE_PHRASE:
            raise forms.ValidationError(f'Type exactly "{ERASE_PHRASE}".')
        return value


@login_required
def me_erase(request: HttpRequest) -> HttpResponse:
    subject = _subject(request)
    form = EraseForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        job = subject_erase(scope=person_scope(request, subject))
        messages.success(request, "Erasure started: everything about you is being deleted.")
        return redirect("me-deletion", deletion_id=job.pk)
    return render(request, "review/me/erase.html", {"subject": subject, "form": form, "phrase": ERASE_PHRASE})

