"""One exception handler: every API error is ``{"code": "...", "detail": "..."}`` with the right status."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from memory.errors import EngramError
from memory.policy.secrets import redact_secrets, scan_text
from memory.refusals import refusals_record

logger = logging.getLogger(__name__)


def _sentence(errors: Any) -> str:
    """Flatten DRF's nested field errors into one human sentence."""
    parts: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for item in value:
                walk(item, path)
        else:
            parts.append(f"{path}: {value}" if path and path != "non_field_errors" else str(value))

    walk(errors, "")
    return "; ".join(parts) or "The request is not valid."


def strings_of(value: Any, found: set[str] | None = None) -> set[str]:
    """Every string in a JSON-like value, keys included."""
    found = set() if found is None else found
    if isinstance(value, str):
        if value:
            found.add(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            strings_of(str(key), found)
            strings_of(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            strings_of(item, found)
    return found


def _submitted(context: dict[str, Any]) -> set[str]:
    """Every string the request sent: body values and keys, query parameters, path parameters."""
    request = context.get("request")
    found = strings_of(list((context.get("kwargs") or {}).values()))
    if request is None:
        return found
    try:
        strings_of(request.data, found)
    except exceptions.APIException:  # a body that does not parse was never read into values
        pass
    for key, values in request.query_params.lists():
        strings_of([key, *values], found)
    return found


_ECHO_MIN_CHARS = 8  # shorter values are replaced only where a message quotes them (DRF's "{input}")


def without_echo(detail: Any, submitted: set[str]) -> Any:
    """``detail`` with every submitted value a message repeats replaced by "…", and any key of it that looks like
    a secret by "<redacted>": a rejected value (a token sent as a `types` entry, a key as a field name) is
    never echoed back, where it would land in the client's and the proxies' logs."""
    if isinstance(detail, dict):
        return {("<redacted>" if isinstance(k, str) and scan_text(k) else k): without_echo(v, submitted)
                for k, v in detail.items()}
    if isinstance(detail, list):
        return [without_echo(item, submitted) for item in detail]
    if not isinstance(detail, str):
        return detail
    code = getattr(detail, "code", None)
    text = str(detail)
    for value in sorted(submitted, key=len, reverse=True):
        if len(value) >= _ECHO_MIN_CHARS:
            text = text.replace(value, "…")
        else:
            text = text.replace(f'"{value}"', '"…"').replace(f"'{value}'", "'…'")
    return exceptions.ErrorDetail(text, code) if code is not None else text


# psycopg errors that mean "busy, try again" rather than "unreachable".
_BUSY = ("DeadlockDetected", "LockNotAvailable", "QueryCanceled", "SerializationFailure")
RETRY_AFTER_SECONDS = 2


def database_error_body(exc: Exception) -> tuple[dict[str, str], int] | None:
    """A database that is down, restarting or overloaded is a 503 the client may retry (with the same
    source.event_id / Idempotency-Key, which makes the retry safe); a value the database cannot store is
    the client's 400. None for anything else."""
    if isinstance(exc, OperationalError | InterfaceError):
        if type(exc.__cause__).__name__ in _BUSY:
            return {"code": "database_busy",
                    "detail": "The database is busy; retry the same request shortly."}, 503
        return {"code": "database_unavailable",
                "detail": "The database is unavailable; retry the same request shortly."}, 503
    if isinstance(exc, DataError):
        logger.warning("database refused a value: %s", exc)
        return {"code": "invalid", "detail": "A value is out of range or cannot be stored."}, 400
    return None


def record_refusals(request: Any, errors: list[EngramError]) -> None:
    """Gate refusals (secret_detected, class_not_allowed, ...) are counted by code for operators;
    the refused content is never stored (memory/refusals.py)."""
    key = getattr(getattr(request, "user", None), "key", None)
    if key is None or not errors:
        return
    scope = getattr(request.user, "scope", None)
    match = getattr(request, "resolver_match", None)
    refusals_record(codes=[e.code for e in errors], tenant_id=key.tenant_id, actor=f"agent_key:{key.pk}",
                    subject_id=scope.subject_id if scope else None, route=match.view_name if match else "")


def engram_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    database = database_error_body(exc)
    if database is not None:
        body, status_code = database
        response = Response(body, status=status_code)
        if status_code == 503:
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, EngramError):
        record_refusals(context.get("request"), [exc])
        # Messages name ids the client sent ("No thread '…'"); one that looks like a secret is not repeated.
        return Response({"code": exc.code, "detail": redact_secrets(exc.detail), **exc.extra}, status=exc.status)
    if isinstance(exc, RequestDataTooBig):
        return Response({"code": "payload_too_large", "detail": "The request body is too large."}, status=400)
    if isinstance(exc, Http404):
        return Response({"code": "not_found", "detail": "Not found."}, status=404)
    if isinstance(exc, DjangoPermissionDenied):
        return Response({"code": "forbidden", "detail": "Permission denied."}, status=403)
    if isinstance(exc, exceptions.ValidationError):
        detail = without_echo(exc.detail, _submitted(context))
        return Response({"code": "invalid", "detail": _sentence(detail), "errors": detail},
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ParseError):
        return Response({"code": "malformed_json", "detail": f"The body is not valid JSON: {exc.detail}"},
                        status=400)
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        response = Response({"code": code, "detail": str(exc.detail)}, status=exc.status_code)
        wait = getattr(exc, "wait", None)  # set on Throttled
        if isinstance(exc, exceptions.Throttled) and wait is not None:
            response["Retry-After"] = str(max(1, math.ceil(wait)))
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            response.status_code = 401
            response["WWW-Authenticate"] = 'Bearer realm="engram"'
        return response
    return None  # unexpected: the middleware turns it into a JSON 500 and logs it
