from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory.identity.access import owned_subjects, reviewed_tenants


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Landing page: links to what this person may use (their memories, review queues)."""
    context = {
        "reviewer_tenants": list(reviewed_tenants(request.user)),
        "subjects": sorted(owned_subjects(request.user), key=lambda s: s.external_id),
    }
    return render(request, "review/home.html", context)
