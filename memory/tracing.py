"""Request ids: one id per HTTP request, on every log line it causes, in the web process and in the workers.

The web middleware (config/observability.py) sets the id for the request; ``enqueue`` runs inside it (on
commit, in the same thread), so the django-q2 ``pre_enqueue`` hook below copies the id into the task's
signed package, and the worker sets it again while it runs that task. ``RequestIdFilter`` puts the current
id on every log record (``-`` outside a request or task); ``JsonFormatter`` writes one JSON object a line
when ENGRAM_LOG_FORMAT=json, for gunicorn's access lines too.

Nothing here imports models: the logging configuration loads this module before the apps are ready.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import re
import time
import uuid
from typing import Any

from memory import metrics

logger = logging.getLogger("engram.tasks")

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("engram_request_id", default=None)
# A proxy's id is taken as it is only when it cannot break a log line or a header.
VALID_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TASK_KEY = "engram_request_id"  # the key in django-q2's task package
_running: dict[str, tuple[contextvars.Token[str | None], float]] = {}


def new_request_id() -> str:
    return uuid.uuid4().hex


def valid_request_id(value: str | None) -> bool:
    return bool(value) and VALID_ID.match(value or "") is not None


def current_request_id() -> str | None:
    return _current.get()


def set_request_id(value: str | None) -> contextvars.Token[str | None]:
    return _current.set(value)


def clear_request_id(**_: Any) -> None:
    """Django's request_finished: the thread's next log lines are no longer the finished request's."""
    _current.set(None)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = _current.get() or "-"
        return True


# The atoms of gunicorn's access line (gunicorn/glogging.py ``atoms``) a JSON line carries, by name.
_ACCESS_FIELDS = {"remote": "h", "method": "m", "path": "U", "query": "q", "status": "s", "bytes": "B",
                  "duration_ms": "M", "user_agent": "a", "request_id": "{x-request-id}o"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request_id, process (and the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name,
        }
        if record.name == "gunicorn.access" and isinstance(record.args, dict):
            # gunicorn logs its access format with a dict of atoms: the fields, not the formatted line.
            atoms = record.args
            body.update({name: atoms.get(atom, "-") for name, atom in _ACCESS_FIELDS.items()})
            body["status"] = int(body["status"]) if str(body["status"]).isdigit() else body["status"]
            body["message"] = f"{body['method']} {body['path']} {body['status']}"
        else:
            body["message"] = record.getMessage()
            body["request_id"] = getattr(record, "request_id", None) or _current.get() or "-"
        body["process"] = record.process
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


# --- django-q2 hooks (connected in memory/apps.py) ---------------------------------------------------


def on_pre_enqueue(sender: Any, task: dict[str, Any], **kwargs: Any) -> None:
    """The enqueuing request's id travels in the task's signed package (not in its arguments: every
    task function keeps taking ids only)."""
    request_id = _current.get()
    if request_id:
        task[TASK_KEY] = request_id


def _queue(task: dict[str, Any]) -> str:
    """The queue a task came from: its own ``cluster``, or (a schedule's task) the worker's."""
    from django_q.conf import Conf

    return str(task.get("cluster") or Conf.CLUSTER_NAME)


def on_pre_execute(sender: Any, func: Any, task: dict[str, Any], **kwargs: Any) -> None:
    """In the worker, before the task runs: its log lines carry the id of the request that queued it."""
    request_id = task.get(TASK_KEY)
    token = _current.set(request_id if valid_request_id(request_id) else None)
    _running[str(task.get("id"))] = (token, time.perf_counter())
    logger.info("task %s started on %s", task.get("func"), _queue(task))


def on_post_execute(sender: Any, func: Any, task: dict[str, Any], **kwargs: Any) -> None:
    token, started = _running.pop(str(task.get("id")), (None, time.perf_counter()))
    seconds = time.perf_counter() - started
    result = "succeeded" if task.get("success") else "failed"
    metrics.task_finished(queue=_queue(task), func=str(task.get("func")), result=result,
                          seconds=seconds)
    logger.info("task %s %s in %.0f ms", task.get("func"), result, seconds * 1000.0)
    if token is not None:
        _current.reset(token)
