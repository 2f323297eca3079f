"""A server-binding psycopg cursor on Django's connection, for the statements Django's client-binding cursors
serve badly: a prepared statement (memory/db/statements.py) and vectors sent in binary (memory/db/vectors.py).

It runs inside the caller's transaction, after Django's checks; errors are Django's, and where Django logs its
queries these are logged too."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection


@contextmanager
def server_cursor(logged_as: Callable[[psycopg.Connection[Any]], str]) -> Iterator[psycopg.Cursor[Any]]:
    """The cursor; ``logged_as(raw connection)`` gives the text logged for the statement, when queries are logged."""
    with connection.cursor():  # Django's checks before a query: health, connection, thread
        pass
    raw = connection.connection
    started = time.monotonic()
    with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
        yield cursor
    if connection.queries_logged:
        connection.queries_log.append({"sql": logged_as(raw), "time": f"{time.monotonic() - started:.3f}"})
