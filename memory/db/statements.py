"""The retrieval statement's SQL, composed with ``psycopg.sql``, and its execution as a prepared statement.

What a scope may read is three row sources (``scoped_sources``): the eligible records, the term-statistics buckets
and the records that match but may not be served. Each is a SELECT with the scope's predicates in its WHERE clause,
the same predicates ``MemoryRecord.objects.for_scope`` writes with the ORM (tenant, subject, the class's allowed
readers, the namespace grant), then validity, servability and the task filters. Isolation is enforced here, in the
storage query: the scoring SQL of memory/retrieval/candidates.py only ever reads these sources.
tests/retrieval/test_statement_sources.py checks that each source holds exactly the rows the ORM's querysets do.

Values are named parameters (``%(name)s``); only identifiers are written into the text, and the number of
placeholders follows the number of namespaces and filter values. So one text serves every subject of the same
scope shape, and the cache (``StatementCache``) is keyed on ``statement_key``: what the text and its scope
parameters are built from.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from django.db import connection, models
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.db.cursors import server_cursor
from memory.models import Confidence, MemoryClass, MemoryRecord, RecordStatus
from memory.retrieval.models import TermBucket
from memory.scope import Scope


@dataclass(frozen=True)
class Filters:
    """The request's task filters, after validation and narrowing to the scope."""

    namespaces: list[str] | None  # None: every namespace the scope allows
    kinds: list[str] | None = None
    types: list[str] | None = None
    fields: list[str] | None = None
    source_types: list[str] | None = None


def statement_key(scope: Scope, filters: Filters) -> tuple[Any, ...]:
    """What a scope's statement is built from: tenant and subject (parameters of it), reader role and namespace
    grant (predicates of ``for_scope``) and the filters. Who asks (the actor, the agent key, the user) changes
    nothing in it, so every key and person reading one subject shares one entry."""
    return (scope.tenant_id, scope.subject_id, scope.reader_role, scope.namespaces, filters)


_RECORDS, _CLASSES, _BUCKETS = MemoryRecord._meta.db_table, MemoryClass._meta.db_table, TermBucket._meta.db_table


def _column(model: type[models.Model], name: str) -> sql.Identifier:
    f = model._meta.get_field(name)
    assert isinstance(f, models.Field) and f.column  # a concrete field of the model's own table
    column = f.column
    return sql.Identifier(model._meta.db_table, column)


def _r(name: str) -> sql.Identifier:
    return _column(MemoryRecord, name)


def _c(name: str) -> sql.Identifier:
    return _column(MemoryClass, name)


def _b(name: str) -> sql.Identifier:
    return _column(TermBucket, name)


_NOW = sql.SQL("(STATEMENT_TIMESTAMP())")


@dataclass
class _Params:
    """Named parameters, numbered as they are added."""

    values: dict[str, Any] = field(default_factory=dict)

    def __call__(self, prefix: str, value: Any) -> sql.Placeholder:
        name = f"{prefix}{len(self.values)}"
        self.values[name] = value
        return sql.Placeholder(name)


def _all(parts: Iterable[sql.Composable]) -> sql.Composable:
    return sql.SQL("({})").format(sql.SQL(" AND ").join(list(parts)))


def _any(parts: Sequence[sql.Composable]) -> sql.Composable:
    return sql.SQL("({})").format(sql.SQL(" OR ").join(parts)) if parts else sql.SQL("FALSE")


def _under_any(column: sql.Identifier, prefixes: Iterable[str], p: _Params) -> sql.Composable:
    """``column`` equals or lies under one of ``prefixes`` (memory/namespaces.under_any_q); none matches nothing."""
    parts: list[sql.Composable] = []
    for prefix in prefixes:
        like = connection.ops.prep_for_like_query(prefix + "/") + "%"  # '_' and '%' in a prefix are literal
        parts += [sql.SQL("{} = {}").format(column, p("s", prefix)),
                  sql.SQL("{}::text LIKE {}").format(column, p("s", like))]
    return _any(parts)


def _in(column: sql.Identifier, values: Sequence[str], p: _Params) -> sql.Composable:
    return sql.SQL("{} IN ({})").format(column, sql.SQL(", ").join(p("s", v) for v in values))


def _scope_predicates(scope: Scope, p: _Params, *, subject: sql.Identifier, tenant: sql.Identifier,
                      namespace: sql.Identifier) -> list[sql.Composable]:
    """``for_scope``'s predicates: the subject's own rows of the tenant, in a class whose allowed readers list the
    scope's reader role, inside the namespace grant."""
    parts: list[sql.Composable] = [sql.SQL("{} = {}").format(subject, p("s", scope.subject_id)),
             sql.SQL("{} @> {}").format(_c("allowed_readers"), p("s", Jsonb([scope.reader_role]))),
             sql.SQL("{} = {}").format(tenant, p("s", scope.tenant_id))]
    if scope.namespaces is not None:
        parts.append(_under_any(namespace, scope.namespaces, p))
    return parts


def _filter_predicates(filters: Filters, p: _Params) -> list[sql.Composable]:
    parts: list[sql.Composable] = []
    if filters.namespaces is not None:
        parts.append(_under_any(_r("namespace"), filters.namespaces, p))
    for name, values in (("kind", filters.kinds), ("memory_type", filters.types), ("field", filters.fields),
                         ("source_type", filters.source_types)):
        if values:
            parts.append(_in(_r(name), values, p))
    return parts


@dataclass(frozen=True)
class Source:
    """A SELECT of one scope's rows, and its columns' names in order (to name a CTE's columns)."""

    columns: tuple[str, ...]
    select: sql.Composable

    @property
    def column_list(self) -> sql.Composable:
        return sql.SQL(", ").join(sql.Identifier(c) for c in self.columns)


@dataclass(frozen=True)
class Scoped:
    """What one scope, under one set of filters, may read: the eligible records (scoped, live, servable), the
    term-statistics buckets of those classes and namespaces, the scoped records that may not be served, and the
    parameters their predicates name."""

    eligible: Source
    buckets: Source
    excluded: Source
    params: dict[str, Any]


# The eligible records' columns, read by the legs and read back for the packets.
RECORD_COLUMNS = ("id", "namespace", "kind", "memory_type", "field", "fact", "text", "source_type", "confidence",
                  "valid_from", "created_at", "memory_class_id", "status", "valid_until")


def _select(columns: Sequence[tuple[str, sql.Composable]], table: str, where: Sequence[sql.Composable],
            join_on: sql.Identifier) -> Source:
    # Each row reads its own class (a lateral lookup by primary key, which LIMIT keeps from being flattened into a
    # join), never the other way round. The prepared statement runs on its generic plan, which guesses that one
    # class passes the readers' predicate and that a subject has an average subject's rows: joined plainly, it
    # could read the subject's rows once per class of the database, every tenant's (bench/tenants.py: a retrieve
    # took 2.4 times as long once ten other tenants held conversations).
    return Source(tuple(name for name, _ in columns), sql.SQL(
        "SELECT {} FROM {} CROSS JOIN LATERAL (SELECT * FROM {} WHERE {} = {} LIMIT 1) AS {} WHERE {}")
                  .format(sql.SQL(", ").join(expr for _, expr in columns), sql.Identifier(table),
                          sql.Identifier(_CLASSES), _c("id"), join_on, sql.Identifier(_CLASSES), _all(where)))


def _epoch(column: sql.Identifier) -> sql.Composable:
    return sql.SQL("EXTRACT(EPOCH FROM {})").format(column)


def scoped_sources(scope: Scope, filters: Filters) -> Scoped:
    p = _Params()
    own = _scope_predicates(scope, p, subject=_r("subject"), tenant=_r("tenant"), namespace=_r("namespace"))
    active, confirmed, candidate = (p("s", str(RecordStatus.ACTIVE)), p("s", str(Confidence.CONFIRMED)),
                                    p("s", str(Confidence.CANDIDATE)))
    live = [sql.SQL("{} = {}").format(_r("status"), active),
            sql.SQL("({} IS NULL OR {} > {})").format(_r("valid_until"), _r("valid_until"), _NOW)]
    # Confirmed records, and candidates where the class serves them.
    servable = sql.SQL("({} = {} OR ({} = {} AND {}))").format(
        _r("confidence"), confirmed, _r("confidence"), candidate, _c("candidates_retrievable"))
    task = _filter_predicates(filters, p)
    retention = [("max_retention_s", _epoch(_c("max_retention"))), ("default_ttl_s", _epoch(_c("default_ttl")))]
    eligible = _select([*((name, _r(name)) for name in (*RECORD_COLUMNS, "search_vector", "embedding",
                                                         "blended_embedding", "context_terms")),
                        ("embed_class", _c("embed")), *retention],
                       _RECORDS, [*own, *live, servable, *task], _r("memory_class"))
    not_live = sql.SQL("(NOT ({} = {}) OR {} <= {} OR ({} = {} AND NOT {}))").format(
        _r("status"), active, _r("valid_until"), _NOW, _r("confidence"), candidate, _c("candidates_retrievable"))
    # The same condition without the class's column: implied by not_live, and on the records' own columns, so that
    # the scan drops the live confirmed records (nearly all of a subject) before any distance to the query is
    # computed or any class read (a 600-record subject: 0.84 ms of a 7 ms statement to find no excluded row).
    maybe_not_live = sql.SQL("(NOT ({} = {}) OR {} <= {} OR {} = {})").format(
        _r("status"), active, _r("valid_until"), _NOW, _r("confidence"), candidate)
    excluded = _select([*((name, _r(name)) for name in ("id", "namespace", "kind", "text", "status", "confidence",
                                                       "search_vector", "embedding")),
                        ("is_expired", sql.SQL("{} <= {}").format(_r("valid_until"), _NOW)), *retention],
                       _RECORDS, [*own, *task, maybe_not_live, not_live], _r("memory_class"))
    # The buckets carry the records' tenant, subject, class and namespace: the same predicates on their own columns.
    bucket_scope = _scope_predicates(scope, p, subject=_b("subject"), tenant=_b("tenant"), namespace=_b("namespace"))
    if filters.namespaces is not None:
        bucket_scope.append(_under_any(_b("namespace"), filters.namespaces, p))
    buckets = _select([(name, _b(name)) for name in ("id", "records", "length")], _BUCKETS, bucket_scope,
                      _b("memory_class"))
    return Scoped(eligible=eligible, buckets=buckets, excluded=excluded, params=p.values)


class RetrievalStatement:
    """The memory statement of one scope: a template (the scoring SQL of memory/retrieval/candidates.py, with
    ``{name}`` fields and ``%(name)s`` parameters) with the scope's row sources composed in, in two variants.

    The template's fields: ``e_columns``/``e_sql`` (the eligible records), ``e_kept`` (the columns of them the legs
    read), ``b_columns``/``b_sql`` (the buckets), ``x_columns``/``x_sql`` (the records that may not be served),
    ``row_object`` (a packet's columns, as json_build_object's arguments over ``el``), and each variant's own parts,
    themselves templates that may use the same fields plus ``subject`` and ``vector_candidates``. The scan variant
    names the subject by a parameter (one text for every subject of the scope's shape); the indexed variant writes
    it and the count of vector candidates as constants (a partial index is only used for a constant). Texts are
    rendered once and kept, so each execution sends a string psycopg has parsed before."""

    def __init__(self, scoped: Scoped, subject_id: int, *, template: str, scan: Mapping[str, str],
                 indexed: Mapping[str, str], kept: Sequence[str]) -> None:
        self.template, self.indexed_parts, self.subject_id = template, indexed, int(subject_id)
        self.fields: dict[str, sql.Composable] = {
            "e_columns": scoped.eligible.column_list, "e_sql": scoped.eligible.select,
            "e_kept": sql.SQL(", ").join(sql.Identifier("eligible", c) for c in kept),
            "b_columns": scoped.buckets.column_list, "b_sql": scoped.buckets.select,
            "x_columns": scoped.excluded.column_list, "x_sql": scoped.excluded.select,
            # The packet's columns only: the vectors stay in the database.
            "row_object": sql.SQL(", ").join(sql.SQL("{}, {}").format(sql.Literal(name), sql.Identifier("el", name))
                                             for name in (*RECORD_COLUMNS, "max_retention_s", "default_ttl_s")),
        }
        self.params = {**scoped.params, "subject": self.subject_id}
        self.scan = self._render(scan, subject=sql.Placeholder("subject"))
        self._indexed: dict[int, str] = {}

    def _render(self, variant: Mapping[str, str], **constants: sql.Composable) -> str:
        parts = {name: sql.SQL(text).format(**self.fields, **constants)  # type: ignore[arg-type]  # ours
                 for name, text in variant.items()}
        return render(self.template, **self.fields, **parts)

    def indexed(self, vector_candidates: int) -> str:
        """The indexed variant's text for this subject, built on first use (large subjects only)."""
        if vector_candidates not in self._indexed:
            self._indexed[vector_candidates] = self._render(self.indexed_parts, subject=sql.Literal(self.subject_id),
                                                            vector_candidates=sql.Literal(int(vector_candidates)))
        return self._indexed[vector_candidates]


def render(template: str, **parts: sql.Composable) -> str:
    """``template`` (``{name}`` fields, ``%(name)s`` parameters, ``{{``/``}}`` for braces) with ``parts`` composed
    in, as text."""
    return sql.SQL(template).format(**parts).as_string()  # type: ignore[arg-type]  # a template of ours


T = TypeVar("T")


class StatementCache(OrderedDict[str, T]):
    """Statements built per ``statement_key``, least recently used first; at most ``kept`` of them."""

    def __init__(self, kept: int = 1024) -> None:
        super().__init__()
        self.kept = kept

    def get_or_build(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        name = repr(key)
        if name in self:
            self.move_to_end(name)
            return self[name]
        built = self[name] = build()
        while len(self) > self.kept:
            self.popitem(last=False)
        return built


def use_generic_plans(sender: Any, connection: Any, **kwargs: Any) -> None:
    """On each new database connection (Django's ``connection_created``): prepared statements run on their generic
    plan from the first execution. Left to itself PostgreSQL plans the memory statement afresh for its first five
    executions on a connection and then keeps doing so, because the custom plans' estimates look cheaper, though
    they are not: measured on subjects of 600, 1,000 and 10,000 records, search p50 7.6 / 10.5 / 15.3 ms planned
    per retrieve against 5.2 / 8.3 / 15.2 ms on the generic plan. The statement is written so that no plan needs
    to know the subject (see memory/retrieval/candidates.py). Django's own queries bind on the client and are planned
    with their values either way; the server's own kept plans (foreign-key checks) follow the setting too, which is
    why a written table needs statistics early (memory/db/statistics.py)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET plan_cache_mode = force_generic_plan")


def fetch_one_prepared(statement: str, params: Mapping[str, Any]) -> tuple[Any, ...]:
    """One row of ``statement`` through a server-side prepared statement.

    Planning the memory statement cost about as much as running it on a subject of a few hundred records. Its text
    does not depend on which subject asks, so once prepared on a connection PostgreSQL soon switches to a generic
    plan and stops planning it per retrieve. Django's cursors bind on the client, which cannot prepare; this is a
    server-binding ``psycopg.Cursor`` on Django's connection, executed with ``prepare=True`` (psycopg prepares
    nothing on a connection whose ``prepare_threshold`` is None, Django's default: it is set to psycopg's own
    default, which only ever applies to server-binding cursors, i.e. this one). Errors are Django's, and where
    Django logs queries this one is logged with its parameters inlined, as Django's own cursors show them."""
    with server_cursor(lambda raw: psycopg.ClientCursor(raw).mogrify(statement, params)) as cursor:
        if cursor.connection.prepare_threshold is None:
            cursor.connection.prepare_threshold = 5
        cursor.execute(statement, params, prepare=True)  # type: ignore[call-overload]  # a statement of ours
        row = cursor.fetchone()
    assert row is not None  # the statement is one SELECT of scalar subqueries: always one row
    return tuple(row)
