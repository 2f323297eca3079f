"""Secrets out of the logs: request lines (gunicorn's access log) and Django's request warnings
("Not Found: /path") repeat what a client put in a URL, and a secret there is refused (422) yet would
still be written to disk. A filter on those loggers redacts what looks like a secret
(memory.policy.secrets.redact_secrets: one scan of a clean line)."""

from __future__ import annotations

import logging


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from memory.policy.secrets import redact_secrets  # not at import: gunicorn's master loads this module

        message = record.getMessage()
        redacted = redact_secrets(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
