from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Landing page: links to what this person may use (their memories, review queues)."""
    user = request.user
    context = {
        "reviewer_tenants": list(user.reviewer_tenants.order_by("slug")),  # type: ignore[union-attr]
        "subjects": list(user.subjects.select_related("tenant").order_by("external_id")),  # type: ignore[union-attr]
    }
    return render(request, "review/home.html", context)
