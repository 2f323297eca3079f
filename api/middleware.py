"""JSON errors for /api/ outside DRF's reach: oversized bodies, unknown URLs and unexpected 500s."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger("engram.api")


class JsonErrorsForApiMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith("/api/"):
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

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith("/api/"):
            return None
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return JsonResponse({"code": "internal_error", "detail": "An unexpected error occurred; it was logged."},
                            status=500)
