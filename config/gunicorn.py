"""gunicorn settings `manage.py serve` starts the web server with (``-c python:config.gunicorn``)."""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

from gunicorn.glogging import Logger

from config.log_redaction import RedactSecrets

# The request id is the response's X-Request-ID header (config/observability.py sets it on every response):
# the access line of a request and the Django and worker lines it caused carry the same id.
access_log_format = ('%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(M)sms '
                     "request_id=%({x-request-id}o)s")


class EngramLogger(Logger):
    """gunicorn's own lines (access and error): request lines with secrets redacted (config/log_redaction.py), and
    JSON objects when ENGRAM_LOG_FORMAT=json, like Django's."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for log in (self.access_log, self.error_log):
            log.addFilter(RedactSecrets())
        if os.environ.get("ENGRAM_LOG_FORMAT", "plain").strip().lower() == "json":
            # Local: gunicorn reads this file before Django is set up; its logger is set up in the worker.
            from memory.tracing import JsonFormatter

            for log in (self.access_log, self.error_log):
                for handler in log.handlers:
                    handler.setFormatter(JsonFormatter())


logger_class = EngramLogger


def post_worker_init(worker: Any) -> None:
    """Before it accepts a request, a web process of the main pool loads the embedding model (one thread); one of
    the bulk pool (config/bulk_pool.py) lowers its CPU priority."""
    # A retrieve waits on the database and the model several times; each time it comes back it needs the
    # interpreter lock, which a thread busy validating a 500-item batch holds for up to the switch interval
    # (5 ms by default). A shorter interval hands it over sooner.
    sys.setswitchinterval(float(os.environ.get("ENGRAM_WEB_SWITCH_INTERVAL_MS", "0.5")) / 1000)
    # Local: gunicorn reads this file before Django is set up; the worker has set it up by now.
    from config.bulk_pool import is_bulk_pool, warm_up_bulk
    from memory.workqueues import warm_up  # local, as above

    if is_bulk_pool():
        # Batch writes yield the cores to the pool that serves reads; set before any thread starts, so that every
        # request thread inherits it (Linux keeps a nice value per thread). No model warm-up: only a batch
        # embedded "now" needs the model.
        from django.conf import settings

        os.nice(settings.ENGRAM_WEB_BULK_NICE)
        warm_up_bulk()
    else:
        warm_up(f"web worker {worker.pid}", 1, queries=True)
    # Everything loaded so far (Django, the model's runtime, the URL and serializer trees) lives as long as the
    # process: moved out of the collector's reach, a full collection no longer walks it. Measured over 400 retrieves
    # in one warmed process: one full collection landed inside a request and took 49 ms; 7 ms with this.
    gc.collect()
    gc.freeze()


def child_exit(server: Any, worker: Any) -> None:
    """A web process ended: its live gauges leave the metrics (its counters and histograms stay summed)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
