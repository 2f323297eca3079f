"""gunicorn settings `manage.py serve` starts the web server with (``-c python:config.gunicorn``)."""

from __future__ import annotations

from typing import Any

from gunicorn import glogging

from config.log_redaction import RedactSecrets


class GunicornLogger(glogging.Logger):
    """gunicorn's logger, with request lines in its access and error logs redacted (config/log_redaction.py)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.access_log, self.error_log):
            log.addFilter(RedactSecrets())


logger_class = GunicornLogger


def post_worker_init(worker: Any) -> None:
    """Each web process loads the embedding model (one thread) before it accepts a request."""
    from memory.workqueues import warm_up

    warm_up(f"web worker {worker.pid}", 1, queries=True)
