"""A transaction PostgreSQL chose as a deadlock's victim, run again.

When two transactions wait for each other's row locks, PostgreSQL aborts one of them after ``deadlock_timeout``
and the other goes on. The aborted one wrote nothing (its whole transaction is rolled back, and its
``on_commit`` callbacks are dropped), so running it again from the start is safe, and it then waits its turn
behind the survivor. Thread writers meet deletion jobs this way: both lock a thread and its summaries, and the
database's own deferred foreign-key checks can take a row lock at commit, in an order no writer chose.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import OperationalError, connection
from psycopg.errors import DeadlockDetected

from memory import metrics

logger = logging.getLogger(__name__)

ATTEMPTS = 3
P = ParamSpec("P")
T = TypeVar("T")


def retried_on_deadlock(fn: Callable[P, T]) -> Callable[P, T]:
    """Run ``fn`` (an outermost transaction: put it above ``transaction.atomic``) up to ATTEMPTS times while it is a
    deadlock's victim. Inside a caller's transaction it runs once: that transaction is aborted with it, and only
    the caller can start it again. Each run again counts in ``engram_deadlock_retries_total``."""
    metrics.deadlock_retries_counted(fn.__name__)

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(1, ATTEMPTS):
            try:
                return fn(*args, **kwargs)
            except OperationalError as exc:
                if not isinstance(exc.__cause__, DeadlockDetected) or connection.in_atomic_block:
                    raise
                logger.info("%s was a deadlock's victim; running it again (attempt %s)", fn.__qualname__, attempt + 1)
                metrics.deadlock_retried(fn.__name__)
                time.sleep(random.uniform(0.005, 0.02) * attempt)  # noqa: S311 - jitter, not a secret
        return fn(*args, **kwargs)  # the last attempt: whatever it raises goes to the caller

    return run
