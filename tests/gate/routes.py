"""The routes of a URL configuration, as the matrix tests enumerate them, and how to call each one.

``api_routes()`` walks the URL resolver, so a route added to api/urls*.py shows up here by itself;
the matrix tests then fail until their tables say what the new route must answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver

METHODS = ("get", "post", "put", "patch", "delete")
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


@dataclass(frozen=True)
class Route:
    pattern: str  # e.g. "api/v1/memories/<str:memory_id>"
    name: str
    methods: tuple[str, ...]  # upper case, the ones the view implements

    def url(self, values: dict[str, Any]) -> str:
        return "/" + _CONVERTER.sub(lambda m: str(values[m.group(1)]), self.pattern)


def _walk(patterns: list[Any], prefix: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for p in patterns:
        if isinstance(p, URLResolver):
            found += _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            found.append((prefix + str(p.pattern), p))
    return found


def routes(prefix: str) -> list[Route]:
    out = []
    for pattern, p in _walk(get_resolver().url_patterns, ""):
        if not pattern.startswith(prefix):
            continue
        view = getattr(p.callback, "view_class", None) or getattr(p.callback, "cls", None)
        methods = tuple(m.upper() for m in METHODS if view is not None and hasattr(view, m))
        out.append(Route(pattern=pattern, name=p.name or "", methods=methods))
    return out


def api_routes() -> list[Route]:
    return routes("api/v1/")


def ui_routes() -> list[Route]:
    # /metrics is for a scraper, not a person: its access rules are tested in tests/operations/test_metrics.py.
    return [r for r in routes("") if not r.pattern.startswith(("api/", "admin/", "accounts/", "metrics"))]


def call(client: Any, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None,
         auth: dict[str, str] | None = None) -> Any:
    extra = {**(auth or {}), **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in (headers or {}).items()}}
    if method == "GET":
        return client.get(url, body or {}, **extra)
    return getattr(client, method.lower())(url, body, format="json", **extra)


def call_every_route(agent: Any, calls: dict[tuple[str, str], dict[str, Any]],
                     values: dict[str, Any]) -> list[tuple[Route, str, Any]]:
    """Every /api/v1/ route and method once as ``agent`` (a tests.conftest.Agent), each call in a
    savepoint that is rolled back, so every call sees the same data. ``calls`` gives a route's body
    and headers, ``values`` the ids its URL needs."""
    out = []
    for route in api_routes():
        for method in route.methods:
            spec = calls.get((route.pattern, method), {})
            with transaction.atomic():
                response = call(agent.client, method, route.url(values), spec.get("body"), spec.get("headers"),
                                agent._headers(None))
                transaction.set_rollback(True)
            out.append((route, method, response))
    return out
