"""Request checks outside DRF's reach: oversized bodies, unstorable characters in the URL and headers,
unknown URLs, database outages and unexpected 500s — as JSON {"code", "detail"} under /api/."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from api.exceptions import RETRY_AFTER_SECONDS, database_error_body
from memory.policy.secrets import describe, scan_payload
from memory.storable import UNSTORABLE, printable

logger = logging.getLogger("engram.api")

# Headers whose values reach a query (idempotency keys, checkpoint versions, credentials).
CHECKED_HEADERS = ("HTTP_AUTHORIZATION", "HTTP_X_ENGRAM_PRINCIPAL", "HTTP_IDEMPOTENCY_KEY", "HTTP_IF_MATCH",
                   "HTTP_IF_NONE_MATCH")


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def unstorable_part(request: HttpRequest, view_kwargs: dict[str, Any]) -> str | None:
    """Name the first path parameter, query parameter or header holding a character no column can store
    (NUL; a lone surrogate cannot arrive through a URL, which is decoded from UTF-8 bytes)."""
    for name, value in view_kwargs.items():
        if isinstance(value, str) and UNSTORABLE.search(value):
            return f"path parameter {name}"
    for key, values in request.GET.lists():
        if UNSTORABLE.search(key) or any(UNSTORABLE.search(v) for v in values):
            return f"query parameter {printable(key)}"
    for header in CHECKED_HEADERS:
        if UNSTORABLE.search(request.META.get(header, "")):
            return "header " + header.removeprefix("HTTP_").replace("_", "-").title()
    return None


def _refuse_secret_identifiers(request: HttpRequest, view_kwargs: dict[str, Any]) -> HttpResponse | None:
    """Identifiers a client chooses (workflow ids, tool-call keys, idempotency keys) are stored and shown in
    URLs, audit rows and exports: one that looks like a secret is refused like a secret in a body (422)."""
    identifiers: dict[str, Any] = {f"path.{name}": value for name, value in view_kwargs.items()
                                   if isinstance(value, str)}
    if request.META.get("HTTP_IDEMPOTENCY_KEY"):
        identifiers["header.Idempotency-Key"] = request.META["HTTP_IDEMPOTENCY_KEY"]
    findings = scan_payload(identifiers) if identifiers else []
    if not findings:
        return None
    return JsonResponse({"code": "secret_detected", "detail": describe(findings)}, status=422)


class JsonErrorsForApiMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not _is_api(request):
            return self.get_response(request)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        # DRF streams the body straight from the socket, bypassing DATA_UPLOAD_MAX_MEMORY_SIZE,
        # so the limit is enforced here, before anything is parsed.
        if settings.DATA_UPLOAD_MAX_MEMORY_SIZE and length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return JsonResponse({"code": "payload_too_large",
                                 "detail": f"The body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."},
                                status=400)
        response = self.get_response(request)
        if response.status_code == 404 and "json" not in response.get("Content-Type", ""):
            return JsonResponse({"code": "not_found", "detail": "No such endpoint."}, status=404)
        return response

    def process_view(self, request: HttpRequest, view_func: Any, view_args: Any,
                     view_kwargs: dict[str, Any]) -> HttpResponse | None:
        """Runs after URL resolution and before the view: nothing has queried the database yet."""
        where = unstorable_part(request, view_kwargs)
        if where is not None:
            detail = f"The {where} contains a NUL character, which is not allowed."
            if _is_api(request):
                return JsonResponse({"code": "invalid", "detail": detail}, status=400)
            return HttpResponseBadRequest(detail)
        if _is_api(request):
            return _refuse_secret_identifiers(request, view_kwargs)
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_api(request):
            return None
        database = database_error_body(exception)
        if database is not None:
            body, status = database
            response = JsonResponse(body, status=status)
            if status == 503:
                response["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return JsonResponse({"code": "internal_error", "detail": "An unexpected error occurred; it was logged."},
                            status=500)
