"""Errors: every refusal from Engram is an :class:`EngramError` carrying the server's ``code``, ``detail``
and HTTP ``status``; a subclass per status lets callers catch the kind they care about.

    try:
        client.remember(["user", "prefs"], "seat", "aisle")
    except SecretDetected as exc:      # 422 secret_detected
        ...
    except EngramError as exc:         # anything else Engram refused
        print(exc.status, exc.code, exc.detail)
"""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    """An answer from Engram that is not a success, or no answer at all (``status`` 0)."""

    def __init__(self, detail: str, *, code: str = "error", status: int = 0, errors: Any = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}" if status else f"{code}: {detail}")
        self.detail = detail
        self.code = code
        self.status = status
        self.errors = errors  # per-field errors of a 400 "invalid"
        self.body = body or {}


class InvalidRequest(EngramError):
    """400: malformed or invalid input (``invalid``, ``malformed_json``, ``payload_too_large`` ...)."""


class AuthenticationFailed(EngramError):
    """401: missing, invalid or expired agent key or principal token."""


class PermissionDenied(EngramError):
    """403: the key lacks a scope, the namespace is outside the grants, or a read-only surface."""


class NotFound(EngramError):
    """404: does not exist, or belongs to another principal (the same answer, by design)."""


class Conflict(EngramError):
    """409: an idempotency key reused with another body, a policy conflict, a tombstoned replay ..."""


class PreconditionFailed(EngramError):
    """412: a checkpoint's If-Match is stale; 428 (no precondition) is reported as this class too."""


class PolicyRefused(EngramError):
    """422: the write gate refused (``class_not_allowed``, ``secret_detected`` ...)."""


class SecretDetected(PolicyRefused):
    """422 secret_detected: the request held what looks like a secret; nothing was stored."""


class RateLimited(EngramError):
    """429: slow down (the client already waited and retried)."""


class ServiceUnavailable(EngramError):
    """503 (or 502/504): Engram or a service it needs is not available right now."""


class ServerError(EngramError):
    """500: an unexpected error on the server."""


class TransportError(EngramError):
    """No HTTP answer: connection refused, timeout, TLS ... (``status`` is 0)."""


_BY_STATUS: dict[int, type[EngramError]] = {
    400: InvalidRequest, 401: AuthenticationFailed, 403: PermissionDenied, 404: NotFound, 409: Conflict,
    412: PreconditionFailed, 428: PreconditionFailed, 422: PolicyRefused, 429: RateLimited,
    502: ServiceUnavailable, 503: ServiceUnavailable, 504: ServiceUnavailable,
}


def error_from(status: int, body: Any) -> EngramError:
    """The exception for an error answer; ``body`` is the decoded JSON (or None)."""
    data: dict[str, Any] = body if isinstance(body, dict) else {}
    code = str(data.get("code") or f"http_{status}")
    detail = str(data.get("detail") or f"HTTP {status}")
    cls = SecretDetected if code == "secret_detected" else _BY_STATUS.get(
        status, ServerError if status >= 500 else EngramError)
    return cls(detail, code=code, status=status, errors=data.get("errors"), body=data)


__all__ = [
    "EngramError", "InvalidRequest", "AuthenticationFailed", "PermissionDenied", "NotFound", "Conflict",
    "PreconditionFailed", "PolicyRefused", "SecretDetected", "RateLimited", "ServiceUnavailable", "ServerError",
    "TransportError", "error_from",
]
