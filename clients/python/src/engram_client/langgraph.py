"""``EngramStore``: a LangGraph ``BaseStore`` on Engram's long-term memory (extra ``engram-client[langgraph]``).

    from engram_client.langgraph import EngramStore

    store = EngramStore(base_url="http://127.0.0.1:8000", api_key="egk_...", subject_id="usr_alice")
    graph = builder.compile(store=store)          # LangGraph nodes and LangMem's tools use it unchanged

How LangGraph's items map onto Engram records:

- A namespace ``("memories", "alice")`` is the Engram namespace ``root + labels`` (``user/memories/alice``
  with the default ``root=("user",)``); each label goes through :mod:`engram_client.labels`, a reversible
  encoding that leaves plain lower-case labels unchanged. Engram allows 8 segments, so with a one-segment
  root a namespace may be 7 labels deep. The namespace must fall under a memory class that lets agents
  write (the tenant's policy; ``user`` does by default, ``user/inferred`` only takes proposals).
- The key is the fact's field (the same encoding); the value dict is the fact's value, stored verbatim.
- A put is an explicit statement through Engram's write gate (scope, secret scan, class policy,
  precedence), so the next get sees it; a new put of the key supersedes the old record, whose version
  stays in the record's history. With ``mode="candidate"`` a put is a model-inferred proposal instead,
  which becomes readable only when consolidation (and a reviewer, where policy says) accepts it.
- A delete asks Engram to delete the record everywhere; the record reads as deleted at once (the
  deletion job purges the rest and verifies). Re-putting the key later writes a new record.
- ``created_at``/``updated_at`` are the current record's creation time, as InMemoryStore sets both on
  every put.

Semantics follow LangGraph's ``InMemoryStore``: reads in a batch see the state before the batch's puts,
the last put of a key in a batch wins; ``search`` filters with ``$eq $ne $gt $gte $lt $lte`` exactly as
InMemoryStore does (a dotted filter key such as ``"user.level"`` is a path into nested values, as in the
SQLite and Postgres stores, unless the value has that key at its top level) and pages with
``limit``/``offset`` after ordering; ``list_namespaces`` sorts namespaces as tuples and pages after
sorting. With a ``query``, items are ordered by similarity: by Engram's own retrieval (lexical +
semantic, the server's embedding model), or, when you configure ``index`` with an ``embed``
function, by that function exactly as InMemoryStore scores (items put with ``index=False`` carry no
score). A query only orders; it never drops an item that matches the filter.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import httpx

try:
    import langgraph  # noqa: F401 - the optional dependency of this integration
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError("This integration needs an extra: pip install 'engram-client[langgraph]'") from missing
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from engram_client import _ops as ops
from engram_client._core import Call, contains_nul, model
from engram_client.aio import AsyncEngram
from engram_client.client import Engram
from engram_client.errors import Conflict, EngramError
from engram_client.labels import decode, encode
from engram_client.models import Memory, Page, SearchResult

KIND = "store_item"
KIND_UNINDEXED = "store_item.noindex"  # put with index=False: InMemoryStore gives it no score
MAX_SEGMENTS = 8
MAX_PATH_CHARS = 300
MAX_TEXT_CHARS = 4000
PAGE = 200
RETRIEVE_LIMIT = 100
RETRIEVE_BUDGET = 100_000
MAX_QUERY_CHARS = 2000
VECTOR_CACHE_SIZE = 10_000


# --- steps a plan yields; a sync or an async driver carries them out ------------------------------------


@dataclass(frozen=True)
class _Embed:
    texts: list[str]
    query: bool = False


Plan = Generator["Call[Any] | _Embed", Any, Any]


class EngramStore(BaseStore):
    """A LangGraph store whose items are Engram memory records of one principal (see the module docs).

    Give ready clients (``client``/``aclient``), or what builds them: ``base_url``, ``api_key`` and a
    ``principal_token`` or a ``subject_id`` (environment: ENGRAM_URL, ENGRAM_API_KEY, ENGRAM_PRINCIPAL,
    ENGRAM_SUBJECT_ID). Usable from several threads, each with its own event loop.
    """

    supports_ttl = False  # like InMemoryStore; memory classes carry Engram's own TTL and retention

    def __init__(self, *, client: Engram | None = None, aclient: AsyncEngram | None = None,
                 base_url: str | None = None, api_key: str | None = None, principal_token: str | None = None,
                 subject_id: str | None = None, root: Sequence[str] = ("user",),
                 mode: Literal["statement", "candidate"] = "statement", index: IndexConfig | None = None,
                 max_items: int = 10_000) -> None:
        settings = {"base_url": base_url, "api_key": api_key, "principal_token": principal_token,
                    "subject_id": subject_id}
        self.client = client or Engram(**settings)  # type: ignore[arg-type]
        self.aclient = aclient or AsyncEngram(**settings)  # type: ignore[arg-type]
        self.root = tuple(root)
        if any(not ops.ns_list(r) or encode(r) != r for r in self.root):
            raise ValueError("root is a list of plain Engram namespace segments, e.g. ('user',).")
        self.mode = mode
        self.max_items = max_items
        self.index_config: IndexConfig | None = None
        self.embeddings: Any = None
        self._fields: list[tuple[str, Any]] = []
        if index:
            self.index_config = index.copy()
            self.embeddings = ensure_embeddings(index.get("embed")) if index.get("embed") else None
            self._fields = [(p, tokenize_path(p) if p != "$" else p) for p in (index.get("fields") or ["$"])]
        # memory id -> {path: vector}; a record never changes, so a cached vector never goes stale.
        self._vectors: OrderedDict[str, dict[str, list[float]]] = OrderedDict()
        self._vectors_lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary())

    # --- BaseStore ----------------------------------------------------------------------------------------
    def batch(self, ops_: Iterable[Op]) -> list[Result]:
        return _drive_sync(self._plan(list(ops_)), self.client, self.embeddings)

    async def abatch(self, ops_: Iterable[Op]) -> list[Result]:
        # One batch at a time per event loop, in the order they were called (asyncio.Lock is FIFO): tasks
        # gathered on one loop then see each other's writes exactly as InMemoryStore's callers do.
        async with self._loop_lock():
            return await _drive_async(self._plan(list(ops_)), self.aclient, self.embeddings)

    def _loop_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._vectors_lock:
            lock = self._loop_locks.get(loop)
            if lock is None:
                lock = self._loop_locks[loop] = asyncio.Lock()
            return lock

    # --- the plan of one batch -------------------------------------------------------------------------
    def _plan(self, batch: list[Op]) -> Plan:
        """InMemoryStore's order: every read sees the state before this batch's puts; then the puts, the
        last one of each (namespace, key) winning."""
        results: list[Result] = [None] * len(batch)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(batch):
            if isinstance(op, GetOp):
                results[i] = yield from self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = yield from self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        for op in puts.values():
            if op.value is None:
                yield from self._delete(op.namespace, op.key)
            else:
                yield from self._put(op)
        return results

    def _get(self, op: GetOp) -> Plan:
        path = self._path(op.namespace, strict=False)
        if path is None:
            return None
        record = yield from self._head(path, op.key)
        return None if record is None else self._item(record)

    def _head(self, path: str, key: str) -> Plan:
        """The record precedence serves for (namespace, key), or None."""
        heads = yield from self._heads(path, key)
        return heads[0] if heads else None

    def _heads(self, path: str, key: str) -> Plan:
        """The live records of (namespace, key): the head precedence chooses, or, where policy cannot
        decide (two organisation records in conflict), every competing one, newest first."""
        try:
            field = encode(key)
        except ValueError:
            return []
        try:
            memories = yield Call("GET", "/facts", params={"namespace": path, "field": field},
                                  parse=_fact_answer, allow_404=True)
        except Conflict as conflict:
            memories = [Memory.model_validate(r) for r in conflict.body.get("records", [])]
        return memories

    def _put(self, op: PutOp) -> Plan:
        path = self._path(op.namespace, strict=True)
        assert path is not None
        value = dict(op.value or {})
        _require_json(value)
        text = self._text(op.key, value, op.index)
        kind = KIND_UNINDEXED if op.index is False else KIND
        build = ops.propose if self.mode == "candidate" else ops.remember
        answer = yield build(text, namespace=path, field=_field(op.key), value=value, kind=kind)
        if self.embeddings is not None and self.mode != "candidate" and op.index is not False:
            paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
            yield from self._vectors_of(answer.memory_id, value, paths)

    def _delete(self, namespace: tuple[str, ...], key: str) -> Plan:
        path = self._path(namespace, strict=False)
        if path is None:
            return
        for memory in (yield from self._heads(path, key)):
            yield ops.forget(memory.memory_id)

    def _search(self, op: SearchOp) -> Plan:
        path = self._path(op.namespace_prefix, strict=False, prefix=True)
        if path is None:
            return []
        records = yield from self._records(path)
        items = [(record, self._item(record)) for record in records]
        if op.filter:
            items = [(r, i) for r, i in items
                     if all(_compare_values(_value_at(i.value, k), v) for k, v in op.filter.items())]
        if not items:
            return []
        query = op.query or ""
        if not query.strip():
            return [_search_item(item, None) for _, item in items[op.offset: op.offset + op.limit]]
        scores: dict[str, float] = yield from self._scores(query, path, [r for r, _ in items])
        return _rank(items, scores, op.offset, op.limit)

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan:
        path = self._path(_literal_prefix(op.match_conditions), strict=False, prefix=True)
        if path is None:
            return []
        records = yield from self._records(path)
        namespaces = {self._namespace(r.namespace) for r in records}
        found = [ns for ns in namespaces if ns and all(_does_match(c, ns) for c in op.match_conditions or ())]
        found = sorted({ns[:op.max_depth] for ns in found}) if op.max_depth is not None else sorted(found)
        return found[op.offset: op.offset + op.limit]

    # --- reading records -------------------------------------------------------------------------------
    def _records(self, path: str) -> Plan:
        """Every live record under ``path``, one per key (the newest confirmed head), oldest first."""
        out: list[Memory] = []
        offset = 0
        while True:
            page = yield Call("GET", "/memories", parse=model(Page[Memory]),
                              params={"namespace": path, "status": "active", "limit": PAGE, "offset": offset})
            out.extend(page.results)
            if page.next_offset is None or len(out) >= self.max_items:
                break
            offset = page.next_offset
        heads: dict[tuple[str, str], Memory] = {}
        for record in out:  # newest first: the first seen of a key is its head
            key = (ops.ns_path(record.namespace), record.field)
            current = heads.get(key)
            if current is None or (current.confidence != "confirmed" and record.confidence == "confirmed"):
                heads[key] = record
        return sorted(heads.values(), key=lambda r: (r.created_at or datetime.min, r.memory_id))

    def _scores(self, query: str, path: str, records: list[Memory]) -> Plan:
        """memory id -> similarity to ``query``; records without a score are left out."""
        if self.embeddings is None:
            result: SearchResult = yield ops.search(query[:MAX_QUERY_CHARS], namespaces=[path],
                                                    limit=RETRIEVE_LIMIT, budget_tokens=RETRIEVE_BUDGET)
            return {p.memory_id: p.score for p in result.packets if p.memory_id}
        [query_vector] = yield _Embed([query], query=True)
        scores: dict[str, float] = {}
        for record in records:
            if record.kind == KIND_UNINDEXED:
                continue
            value = record.value if isinstance(record.value, dict) else {"value": record.value}
            vectors = yield from self._vectors_of(record.memory_id, value, self._fields)
            if vectors:
                scores[record.memory_id] = max(_cosine(query_vector, v) for v in vectors.values())
        return scores

    def _vectors_of(self, memory_id: str, value: dict[str, Any], paths: list[tuple[str, Any]]) -> Plan:
        with self._vectors_lock:
            cached = self._vectors.get(memory_id)
        if cached is not None:
            return cached
        texts: dict[str, str] = {}
        for name, tokens in paths:
            found = get_text_at_path(value, tokens)
            for n, text in enumerate(found):
                texts[f"{name}.{n}" if len(found) > 1 else name] = text
        vectors = dict(zip(texts, (yield _Embed(list(texts.values()))), strict=True)) if texts else {}
        with self._vectors_lock:
            self._vectors[memory_id] = vectors
            while len(self._vectors) > VECTOR_CACHE_SIZE:
                self._vectors.popitem(last=False)
        return vectors

    # --- mapping -----------------------------------------------------------------------------------------
    def _path(self, namespace: tuple[str, ...], *, strict: bool, prefix: bool = False) -> str | None:
        """The Engram namespace of a LangGraph namespace. ``strict`` (puts) raises when it cannot be
        stored; reads return None instead (nothing can be stored there, so nothing is found)."""
        try:
            segments = [*self.root, *(encode(label) for label in namespace)]
            if len(segments) > MAX_SEGMENTS:
                raise ValueError(f"Engram namespaces have at most {MAX_SEGMENTS} segments; with the root "
                                 f"{self.root} a namespace has at most {MAX_SEGMENTS - len(self.root)} labels.")
            path = "/".join(segments)
            if len(path) > MAX_PATH_CHARS:
                raise ValueError(f"The namespace is longer than {MAX_PATH_CHARS} characters once encoded.")
        except ValueError as exc:
            if strict:
                raise InvalidNamespaceError(f"{namespace}: {exc}") from exc
            return None
        if not namespace and not prefix:
            return None
        return path

    def _namespace(self, segments: list[str]) -> tuple[str, ...]:
        if tuple(segments[: len(self.root)]) != self.root:
            return ()
        return tuple(decode(s) for s in segments[len(self.root):])

    def _item(self, record: Memory) -> Item:
        value = record.value if isinstance(record.value, dict) else {"value": record.value}
        when = record.created_at or datetime.min
        return Item(value=value, key=decode(record.field), namespace=self._namespace(record.namespace),
                    created_at=when, updated_at=when)

    def _text(self, key: str, value: dict[str, Any], index: Literal[False] | list[str] | None) -> str:
        """The record's sentence, which Engram indexes (lexical and semantic) and people read on /me/: the
        texts at the index fields, or every string in the value."""
        if index:
            paths = [tokenize_path(p) for p in index]
        elif self.index_config:
            paths = [tokens for _, tokens in self._fields]
        else:
            paths = []
        texts = [t for tokens in paths for t in get_text_at_path(value, tokens)] if paths else _strings(value)
        text = "\n".join(t.strip() for t in texts if t.strip()) or json.dumps(value, sort_keys=True)
        return text[:MAX_TEXT_CHARS].strip() or key


# --- drivers ----------------------------------------------------------------------------------------------


def _drive_sync(plan: Plan, client: Engram, embeddings: Any) -> Any:
    reply: Any = None
    error: EngramError | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(reply)
        except StopIteration as done:
            return done.value
        reply, error = None, None
        try:
            if isinstance(step, _Embed):
                reply = ([embeddings.embed_query(step.texts[0])] if step.query
                         else embeddings.embed_documents(step.texts))
            else:
                reply = client._run(step)
        except EngramError as exc:  # the plan may handle it (a conflict); else it propagates
            error = exc


async def _drive_async(plan: Plan, client: AsyncEngram, embeddings: Any) -> Any:
    reply: Any = None
    error: EngramError | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(reply)
        except StopIteration as done:
            return done.value
        reply, error = None, None
        try:
            if isinstance(step, _Embed):
                reply = ([await embeddings.aembed_query(step.texts[0])] if step.query
                         else await embeddings.aembed_documents(step.texts))
            else:
                reply = await client._run(step)
        except EngramError as exc:
            error = exc


# --- helpers ----------------------------------------------------------------------------------------------


def _fact_answer(response: httpx.Response) -> list[Memory]:
    """/facts: the head (200) or none (404); a conflict (409) was raised as :class:`Conflict`."""
    if response.status_code == 404:
        return []
    return [Memory.model_validate(response.json())]


def _field(key: str) -> str:
    try:
        return encode(key)
    except ValueError as exc:
        raise ValueError(f"The key {key!r} cannot be stored: {exc}") from exc


def _require_json(value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Engram stores JSON values; this one is not ({exc}). NaN and Infinity have no JSON "
                         "form.") from exc
    if contains_nul(value):
        raise ValueError("Engram's database cannot store the NUL character (\\x00) in a value.")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at,
                      updated_at=item.updated_at, score=score)


def _rank(items: list[tuple[Memory, Item]], scores: dict[str, float], offset: int, limit: int) -> list[SearchItem]:
    """InMemoryStore's order: scored items by score (descending), then, when fewer than ``limit`` were
    kept, items without a score fill the page."""
    scored = sorted(((scores[r.memory_id], i) for r, i in items if r.memory_id in scores),
                    key=lambda pair: pair[0], reverse=True)
    scoreless = [i for r, i in items if r.memory_id not in scores]
    kept: list[tuple[float | None, Item]] = list(scored[offset: offset + limit])
    if scoreless and len(kept) < limit:
        kept.extend((None, item) for item in scoreless[: limit - len(kept)])
    return [_search_item(item, score) for score, item in kept]


def _cosine(x: list[float], y: list[float]) -> float:
    dot = sum(a * b for a, b in zip(x, y, strict=False))
    nx, ny = math.sqrt(sum(a * a for a in x)), math.sqrt(sum(b * b for b in y))
    return dot / (nx * ny) if nx and ny else 0.0


def _literal_prefix(conditions: Sequence[MatchCondition] | None) -> tuple[str, ...]:
    """The leading labels of a prefix condition before any wildcard: the listing can start there."""
    for condition in conditions or ():
        if condition.match_type == "prefix":
            labels: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def _does_match(condition: MatchCondition, key: tuple[str, ...]) -> bool:
    """InMemoryStore's namespace matching, with ``*`` matching any one label."""
    path = condition.path
    if len(key) < len(path):
        return False
    pairs: Iterable[tuple[str, str]]
    if condition.match_type == "prefix":
        pairs = zip(key, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(key), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or k == p for k, p in pairs)


def _value_at(value: dict[str, Any], key: str) -> Any:
    """The value a filter key names: the top-level key as InMemoryStore reads it, else a dotted key as a path
    into nested objects, as the SQLite and Postgres stores read it (``"user.access-level"`` is
    ``value["user"]["access-level"]``). A path that leads nowhere is None, as a missing key is."""
    if key in value or "." not in key:
        return value.get(key)
    current: Any = value
    for part in key.split("."):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def _compare_values(item_value: Any, filter_value: Any) -> bool:
    """InMemoryStore's filter semantics (JSONB-like; nested objects; operators)."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_apply_operator(item_value, k, v) for k, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare_values(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, list | tuple):
        return (isinstance(item_value, list | tuple) and len(item_value) == len(filter_value)
                and all(_compare_values(i, f) for i, f in zip(item_value, filter_value, strict=False)))
    return bool(item_value == filter_value)


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: bool(a == b),
    "$ne": lambda a, b: bool(a != b),
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def _apply_operator(value: Any, operator: str, operand: Any) -> bool:
    if operator not in _OPERATORS:
        raise ValueError(f"Unsupported operator: {operator}")
    return _OPERATORS[operator](value, operand)


__all__ = ["EngramStore"]
