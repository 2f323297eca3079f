"""Errors of the threads area beyond memory.errors: HTTP preconditions for checkpoints."""

from __future__ import annotations

from memory.errors import EngramError


class PreconditionRequired(EngramError):
    status = 428
    code = "precondition_required"


class PreconditionFailed(EngramError):
    status = 412
    code = "precondition_failed"
