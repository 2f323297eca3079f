"""Statements whose parameters include many vectors, sent in pgvector's binary form.

Django's cursors bind on the client: every value is formatted as text into the statement, so an embedding's 384
numbers become a literal that Python formats and PostgreSQL parses back. For the UPDATE that stores an import's
vectors that was most of its cost (500 rows in one statement: about 220 µs a row as text, 60 µs in binary). Here
the statement runs on a server-binding ``psycopg.Cursor`` on Django's connection (inside the caller's transaction),
and numpy arrays are dumped by pgvector's own binary dumper, registered on that cursor only: the connection's
loaders are untouched, so every other read of a vector on it still returns pgvector's text form.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from pgvector.psycopg.vector import VectorBinaryDumper
from psycopg.types import TypeInfo

from memory.db.cursors import server_cursor

# The vector type's description per open connection (its oid depends on the database the extension was created in).
_VECTOR_TYPES: weakref.WeakKeyDictionary[psycopg.Connection[Any], TypeInfo] = weakref.WeakKeyDictionary()


def _vector_type(raw: psycopg.Connection[Any]) -> TypeInfo:
    info = _VECTOR_TYPES.get(raw)
    if info is None:
        info = TypeInfo.fetch(raw, "vector")
        if info is None:
            raise psycopg.ProgrammingError("the vector type is not installed in this database")
        _VECTOR_TYPES[raw] = info
    return info


def execute_with_vectors(statement: str, params: Sequence[Any]) -> int:
    """Run ``statement`` and return the number of rows it changed. Its vectors (numpy arrays, or lists of them) take
    ``%b`` placeholders and are sent as ``vector`` / ``vector[]`` in binary; other values take ``%s``."""
    # Logged without its values: the vectors are binary.
    with server_cursor(lambda raw: statement) as cursor:
        info = _vector_type(cursor.connection)
        info.register(cursor)  # the array type, so that a list of vectors is dumped as vector[]
        cursor.adapters.register_dumper("numpy.ndarray", type("", (VectorBinaryDumper,), {"oid": info.oid}))
        cursor.execute(statement, params)  # type: ignore[call-overload]  # a statement of ours
        return cursor.rowcount
