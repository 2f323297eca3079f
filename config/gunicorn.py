"""gunicorn settings `manage.py serve` starts the web server with (``-c python:config.gunicorn``)."""

from __future__ import annotations

from typing import Any

# Request lines are logged with secrets redacted (config/log_redaction.py).
logger_class = "config.log_redaction.GunicornLogger"


def post_worker_init(worker: Any) -> None:
    """Each web process loads the embedding model (one thread) before it accepts a request."""
    from memory.workqueues import warm_up

    warm_up(f"web worker {worker.pid}", 1, queries=True)
