"""/me/: a logged-in person's own memories: search, filters and pages with provenance in words; confirm or
deny the assistant's guesses; history, correct, delete (one or many), deletions, export, erase.

A person sees only the subjects they are linked to (Subject.users). Every read goes through the
scoped query with ``reader_role="owner"``, so the memory class's "allowed readers" decides in SQL;
a reviewer's permission plays no part here.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from memory.deletion.export import export_json
from memory.deletion.models import DeletionJob
from memory.deletion.presenters import job_payload
from memory.deletion.services import memory_delete, subject_erase
from memory.errors import EngramError
from memory.identity.access import access_own_deletion, access_record, access_subject, owned_subjects, owner_scope
from memory.models import MemoryRecord, Subject
from memory.records.selectors import memory_history
from memory.records.services import memory_correct
from memory.scope import Scope
from review.me import SOURCE_CHOICES, STATUS_CHOICES, my_deletions, my_namespaces, my_page, my_row, row_of
from review.services import MAX_BULK_DELETE, guess_confirm, memories_delete

ERASE_PHRASE = "delete everything"


# --- access (memory/identity/access.py) ----------------------------------------------------------


def _subjects(request: HttpRequest) -> list[Subject]:
    return owned_subjects(request.user)


def _subject(request: HttpRequest) -> Subject:
    """The subject picked by ?subject= (or the form's subject), among the person's own; else their first."""
    return access_subject(request.user, request.POST.get("subject") or request.GET.get("subject"))


def person_scope(request: HttpRequest, subject: Subject) -> Scope:
    return owner_scope(request.user, subject)


def _record(request: HttpRequest, memory_id: str) -> tuple[Subject, Scope, MemoryRecord]:
    """The record among the person's subjects, or 404 (the same for missing and someone else's)."""
    return access_record(request.user, memory_id)


class SearchForm(forms.Form):
    """The search and filters of /me/ (GET, so every result page has its own address)."""

    q = forms.CharField(required=False, max_length=200, label="Search my memories")
    namespace = forms.ChoiceField(required=False, label="Namespace")
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES, label="Status")
    source = forms.ChoiceField(required=False, choices=SOURCE_CHOICES, label="Where it came from")

    def __init__(self, *args: Any, namespaces: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["namespace"].choices = [("", "All namespaces"), *((n, n) for n in namespaces)]  # type: ignore[attr-defined]


def _back(request: HttpRequest, subject: Subject) -> HttpResponse:
    """Back to the list the person acted from (its search, filters and page), else their first page."""
    target = request.POST.get("next", "")
    if not target.startswith("/me/") or not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = f"{reverse('me')}?subject={subject.pk}"
    return redirect(target)


# --- pages ----------------------------------------------------------------------------------------


@login_required
def me_home(request: HttpRequest) -> HttpResponse:
    """Search, filters and pages; with htmx only the results are sent back (the form keeps its focus)."""
    subjects = _subjects(request)
    if not subjects:
        return render(request, "review/me/index.html", {"subjects": []})
    subject = _subject(request)
    scope = person_scope(request, subject)
    form = SearchForm(request.GET, namespaces=my_namespaces(scope=scope))
    form.is_valid()  # an invalid field is left out of cleaned_data (and noted on the page); the rest still apply
    filters = {k: v for k, v in form.cleaned_data.items() if v}
    page, rows = my_page(scope=scope, number=request.GET.get("page"), **filters)
    context = {"subjects": subjects, "subject": subject, "form": form, "page": page, "rows": rows,
               "filtered": bool(filters), "next": request.get_full_path()}
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "review/me/_results.html", context)
    return render(request, "review/me/index.html", context)


@login_required
def me_history(request: HttpRequest, memory_id: str) -> HttpResponse:
    subject, scope, record = _record(request, memory_id)
    chain = [row_of(r) for r in memory_history(scope=scope, memory_id=memory_id)]
    return render(request, "review/me/history.html", {"subject": subject, "record": row_of(record), "chain": chain})


def _acted(request: HttpRequest, subject: Subject, scope: Scope, memory_id: str, text: str, *,
           error: bool = False) -> HttpResponse:
    """htmx: the acted-on row again with the note (``memory_id`` may be a new record); otherwise a
    message and back to the list the person was on."""
    if request.htmx:  # type: ignore[attr-defined]
        row = my_row(scope=scope, memory_id=memory_id)
        if row is None:
            raise Http404("No such memory.")
        return render(request, "review/me/_row.html", {"r": row, "subject": subject, "note": text, "error": error,
                                                       "next": request.POST.get("next", "")})
    (messages.error if error else messages.success)(request, text)
    return _back(request, subject)


@login_required
@require_POST
def me_confirm(request: HttpRequest, memory_id: str) -> HttpResponse:
    """"That's right": the guess becomes the person's own statement, through the write gate."""
    subject, scope, record = _record(request, memory_id)
    try:
        result = guess_confirm(scope=scope, memory_id=memory_id)
    except EngramError as exc:
        return _acted(request, subject, scope, memory_id, exc.detail, error=True)
    return _acted(request, subject, scope, result.record.pk,
                  f"Confirmed “{record.field}”: it is now remembered as something you said.")


@login_required
@require_POST
def me_deny(request: HttpRequest, memory_id: str) -> HttpResponse:
    """"That's wrong": the guess is deleted by a deletion job, like any memory."""
    subject, scope, record = _record(request, memory_id)
    try:
        memory_delete(scope=scope, memory_id=memory_id)
    except EngramError as exc:
        return _acted(request, subject, scope, memory_id, exc.detail, error=True)
    return _acted(request, subject, scope, memory_id,
                  f"Deleting the guess “{record.field}”; its progress is under Deletions.")


@login_required
@require_POST
def me_delete_selected(request: HttpRequest) -> HttpResponse:
    """Step 1 (no ``confirm``): show what was selected and ask. Step 2: one deletion job per memory."""
    subject = _subject(request)
    scope = person_scope(request, subject)
    ids = request.POST.getlist("ids")[:MAX_BULK_DELETE]
    if not ids:
        messages.error(request, "Select the memories to delete first.")
        return _back(request, subject)
    if request.POST.get("confirm") != "yes":
        rows = [row for row in (my_row(scope=scope, memory_id=i) for i in ids) if row is not None]
        if not rows:
            raise Http404("No such memory.")
        return render(request, "review/me/delete_selected.html",
                      {"subject": subject, "rows": rows, "next": request.POST.get("next", "")})
    result = memories_delete(scope=scope, memory_ids=ids)
    if result.jobs:
        messages.success(request, f"Started {len(result.jobs)} deletion(s). Each is complete when it says Completed.")
    for memory_id, detail in result.failed.items():
        messages.error(request, f"{memory_id}: {detail}")
    return redirect(f"{reverse('me-deletions')}?subject={subject.pk}")


@login_required
def me_deletions(request: HttpRequest) -> HttpResponse:
    """The subject's deletion jobs and their statuses, refreshed while any is still running."""
    subject = _subject(request)
    jobs, counts = my_deletions(scope=person_scope(request, subject))
    busy = any(job.status in (DeletionJob.Status.PENDING, DeletionJob.Status.RUNNING) for job in jobs)
    context = {"subject": subject, "jobs": jobs, "counts": counts, "busy": busy,
               "subjects": _subjects(request)}
    if request.htmx:  # type: ignore[attr-defined]
        return render(request, "review/me/_deletions.html", context)
    return render(request, "review/me/deletions.html", context)


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
                                    text=form.cleaned_data["text"])
        except EngramError as exc:
            messages.error(request, exc.detail)
        else:
            messages.success(request, f"Corrected: the new memory {result.record.pk} replaces the old one.")
            return redirect(f"{reverse('me')}?subject={subject.pk}")
    return render(request, "review/me/correct.html", {"subject": subject, "record": row_of(record), "form": form})


@login_required
def me_delete(request: HttpRequest, memory_id: str) -> HttpResponse:
    """GET: the confirmation. POST: queue the deletion and show its live status."""
    subject, scope, record = _record(request, memory_id)
    if request.method != "POST":
        return render(request, "review/me/delete.html", {"subject": subject, "record": row_of(record)})
    job = memory_delete(scope=scope, memory_id=memory_id)
    messages.success(request, "Deletion started. It is complete when every step below is done.")
    return redirect("me-deletion", deletion_id=job.pk)


@login_required
def me_deletion(request: HttpRequest, deletion_id: str) -> HttpResponse:
    job = access_own_deletion(request.user, deletion_id)
    context = {"job": job_payload(job), "finished": job.status in ("completed", "failed"),
               "poll_url": reverse("me-deletion", args=[job.pk])}
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

