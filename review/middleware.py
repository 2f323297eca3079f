"""The API's input rules for the people's pages: a character no column can store is refused before any view.

A NUL character (PostgreSQL's text columns refuse it) or a lone surrogate (UTF-8 cannot encode it) in a
form field, a query parameter, a parameter's name or a path parameter would reach a query and fail there
with a server error, after part of an action may have run. Browsers send UTF-8, which cannot carry a lone
surrogate, but Django decodes a body and its query string with the charset the request names, and some
codecs (UTF-7, unicode_escape) produce one. Django's form fields refuse NUL, but several actions read
their ids from the request directly. So every page outside /api/ gets one check here, after the CSRF
check and before the view, as the API gets its own: a 400 page that names the field and says that
nothing was changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory.storable import printable, unstorable_problem


def _first_problem(where: str, fields: Iterable[tuple[str, list[Any]]]) -> str | None:
    for name, values in fields:
        if (problem := unstorable_problem(name)) is not None:
            return f"The name of a {where} ({printable(name)}) {problem}."
        for value in values:
            if isinstance(value, str) and (problem := unstorable_problem(value)) is not None:
                return f"The {where} “{printable(name)}” {problem}."
    return None


def unstorable_input(request: HttpRequest, view_kwargs: dict[str, Any]) -> str | None:
    """A sentence naming the first path parameter, query parameter or form field (name or value) holding a
    character no column can store, or None."""
    return (_first_problem("path parameter", ((k, [v]) for k, v in view_kwargs.items()))
            or _first_problem("query parameter", request.GET.lists())
            or (_first_problem("form field", request.POST.lists()) if request.method == "POST" else None)
            or (_first_problem("uploaded file's name", ((k, [f.name for f in v]) for k, v in request.FILES.lists()))
                if request.method == "POST" else None))


class UnstorableInputMiddleware:
    """Refuse UI requests with unstorable characters in any parameter (see the module docs)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Any, view_args: Any,
                     view_kwargs: dict[str, Any]) -> HttpResponse | None:
        if request.path.startswith("/api/"):
            return None  # the API answers in JSON (api.middleware, api.parsers)
        problem = unstorable_input(request, view_kwargs)
        if problem is None:
            return None
        return render(request, "bad_input.html", {"problem": problem}, status=400)
