"""Errors of the threads area beyond memory.errors: HTTP preconditions for checkpoints, the summarizer."""

from __future__ import annotations

from memory.errors import EngramError


class PreconditionRequired(EngramError):
    status = 428
    code = "precondition_required"


class PreconditionFailed(EngramError):
    status = 412
    code = "precondition_failed"


class SummarizerUnavailable(EngramError):
    """The configured summarizer service failed or answered nothing usable; nothing was written."""

    status = 503
    code = "summarizer_unavailable"
