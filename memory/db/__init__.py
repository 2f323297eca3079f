"""Database mechanics, apart from the policy that uses them.

``bulk``: rows written by COPY (psycopg's ``cursor.copy``) with the values ``bulk_create`` would send.
``statements``: SQL composed with ``psycopg.sql`` — the retrieval statement's scoped row sources, its
cache, and its execution as a server-side prepared statement. Only this package copies rows or composes
SQL with ``psycopg.sql`` (tests/test_layout.py), so the mechanics are read and changed in one place.
"""
