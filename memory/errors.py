"""Domain errors raised by services and selectors; the API maps each to {"code", "detail"} + status."""

from __future__ import annotations

from typing import Any


class EngramError(Exception):
    status = 400
    code = "invalid"

    def __init__(self, detail: str, *, code: str | None = None, status: int | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        if status:
            self.status = status
        self.extra = extra or {}


class InvalidInput(EngramError):
    status = 400
    code = "invalid"


class ScopeMismatch(EngramError):
    status = 400
    code = "scope_mismatch"


class Forbidden(EngramError):
    status = 403
    code = "forbidden"


class NotFound(EngramError):
    status = 404
    code = "not_found"


class Conflict(EngramError):
    status = 409
    code = "conflict"


class PolicyRefused(EngramError):
    status = 422
    code = "class_not_allowed"


class SecretDetected(EngramError):
    status = 422
    code = "secret_detected"
