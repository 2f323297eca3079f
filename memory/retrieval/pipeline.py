"""memory_retrieve: verified scope -> allowed namespaces -> validity and task filters -> lexical and
semantic candidates -> fusion and reranking -> limit and token budget -> packets + a retrieval log.

Queries per call (pinned by tests/retrieval/test_scoped_vector_search.py): one statement for the memory
candidates (both legs, fusion, the "excluded" explanations and the pending-embedding count;
candidates.py), and the log insert. Providers add their own.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from memory import metrics
from memory.content import unseal_parts
from memory.embedder import get_embedder
from memory.embedder_guard import EmbedderUnavailable
from memory.errors import InvalidInput
from memory.models import Confidence
from memory.namespaces import intersect_prefixes, to_list
from memory.normalise import normalise_text, normalise_value
from memory.policy.injection import content_flags
from memory.policy.secrets import refuse_secrets
from memory.retrieval import candidates as legs
from memory.retrieval.names import mark_names
from memory.retrieval.ranking import MIN_SIMILARITY, Ranked, below_threshold, classify, score
from memory.retrieval.services import retrieval_log_record
from memory.retrieval.sources import RetrievalQuery, SourceItem, provider
from memory.scope import READ, Scope

DEFAULT_BUDGET_TOKENS = 400
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MEMORY = "memory"


@dataclass(frozen=True)
class RetrieveRequest:
    query: str
    namespaces: list[str] | None = None  # requested prefixes ("user/travel_preferences"); None = all allowed
    kinds: list[str] | None = None
    types: list[str] | None = None
    filters: dict[str, Any] = field(default_factory=dict)
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    limit: int = DEFAULT_LIMIT
    include: tuple[str, ...] = (MEMORY,)


@dataclass
class RetrieveResult:
    retrieval_id: str
    packets: list[dict[str, Any]]
    budget: dict[str, int]
    dropped: dict[str, int]
    # What this answer lacks, e.g. "semantic_unavailable": the embedding model is down, lexical matches only.
    degraded: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"retrieval_id": self.retrieval_id, "packets": self.packets, "budget": self.budget,
                "dropped": self.dropped, "degraded": self.degraded}


def _pool_size(limit: int) -> int:
    # Each leg fetches more than `limit` so fusion has something to reorder and the budget can skip.
    tuning = settings.ENGRAM_RECALL
    return min(max(int(tuning["pool_factor"]) * limit, int(tuning["pool_min"])), 400)


def _as_list(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise InvalidInput(f"filters.{name} is a string or a list of strings.", code="invalid_filter")
    return values


def _memory_item(found: legs.Candidate) -> Ranked:
    row = found.row
    fact, text = unseal_parts(row["fact"], row["text"])
    status = "confirmed" if row["confidence"] == Confidence.CONFIRMED else "candidate"
    valid_from = row["valid_from"]
    packet: dict[str, Any] = {
        "source": MEMORY, "fact": text, "status": status,
        "source_date": valid_from.date().isoformat() if valid_from else None,
        "memory_id": row["id"], "kind": row["kind"], "namespace": to_list(row["namespace"]),
    }
    if found.in_conflict:
        packet["conflict"] = True
    # Two records with the same fact in different namespaces are one fact for the caller.
    key = f"memory:{row['field']}:{normalise_value(fact.get('value'))}:{normalise_text(text)}"
    return Ranked(source=MEMORY, item_id=row["id"], text=text, packet=packet, authority=row["source_type"],
                  confirmed=status == "confirmed", source_date=valid_from, dedupe_key=key,
                  memory_class_id=row["memory_class_id"], lexical_rank=found.lexical_rank,
                  semantic_rank=found.semantic_rank, similarity=found.similarity,
                  lexical=found.lexical if found.lexical is not None else None,
                  extra={"namespace": row["namespace"],
                         "retention": _shortest_seconds(row["max_retention_s"], row["default_ttl_s"])})


def _shortest_seconds(*spans: float | None) -> float | None:
    given = [s for s in spans if s is not None]
    return min(given) if given else None


def _provider_item(item: SourceItem) -> Ranked:
    packet = dict(item.packet)
    packet.setdefault("source", item.source)
    confirmed = packet.get("status") != "candidate"
    return Ranked(source=item.source, item_id=item.item_id, text=item.text, packet=packet,
                  authority=item.authority, confirmed=confirmed, source_date=item.source_date,
                  dedupe_key=f"{item.source}:{normalise_text(item.text)}", lexical_rank=item.lexical_rank,
                  semantic_rank=item.semantic_rank, similarity=item.semantic_similarity,
                  extra={"grant": item.grant})


def _memory_candidates(scope: Scope, request: RetrieveRequest, filters: legs.Filters, vector: list[float],
                       pool: int, dropped: dict[str, int], log: list[dict[str, Any]],
                       retention: list[float]) -> list[Ranked]:
    found = legs.search(scope, filters, request.query, vector, pool=pool, limit=request.limit,
                        max_distance=1.0 - MIN_SIMILARITY)
    if found.pending:
        dropped["semantic_pending"] = found.pending
    for row in found.excluded:
        reason = row["reason"]
        dropped[reason] = dropped.get(reason, 0) + 1
        if reason == "deleted":
            # Counted, never written: a deletion in progress must not find a log written after its purge that
            # names the record, and a log has nothing to say about a record that is gone.
            continue
        log.append({"source": MEMORY, "id": row["id"], "memory_id": row["id"], "namespace": to_list(row["namespace"]),
                    "kind": row["kind"], "status": row["status"], "selected": False, "reason": reason,
                    "similarity": None if row["near"] is None else round(1.0 - float(row["near"]), 4)})
        # The log names this record too (its text is shown from the record), so its class's retention bounds
        # the log's.
        span = _shortest_seconds(row["max_retention_s"], row["default_ttl_s"])
        if span is not None:
            retention.append(span)
    return [_memory_item(c) for c in found.candidates]


def _narrowed(scope: Scope, request: RetrieveRequest, log: list[dict[str, Any]],
              dropped: dict[str, int]) -> list[str] | None:
    if request.namespaces is None:
        return None
    allowed: list[str] = []
    for prefix in request.namespaces:
        inside = intersect_prefixes(scope.namespaces, [prefix]) or []
        if not inside:
            # Logged without content: only the name the caller itself sent.
            dropped["out_of_scope"] = dropped.get("out_of_scope", 0) + 1
            log.append({"source": MEMORY, "namespace": to_list(prefix), "selected": False, "reason": "out_of_scope"})
        allowed.extend(inside)
    return sorted(set(allowed))


def memory_retrieve(*, scope: Scope, request: RetrieveRequest) -> RetrieveResult:
    """Retrieve packets for ``request`` within ``scope``, and log the call."""
    scope.require(READ)
    # The whole request is kept in the retrieval log (shown by /retrievals/{id} and the export): a secret in
    # any of it is refused like one in a write, and stored nowhere.
    refuse_secrets({"query": request.query, **_request_json(request)})
    for index, name in enumerate(request.include):
        if name != MEMORY and provider(name) is None:  # the value is not repeated: a rejected value is never echoed
            raise InvalidInput(f"include[{index}] is not a source: give memory, summaries, procedures or knowledge.",
                               code="invalid_include")
    started = time.perf_counter()
    timings: dict[str, float] = {}
    dropped: dict[str, int] = {}
    embedder = get_embedder()
    try:
        vector = embedder.embed_query(request.query)
    except EmbedderUnavailable:
        # The model is down: answer from the lexical leg and say so; every vector leg skips an empty vector.
        vector = []
        dropped["semantic_unavailable"] = 1
    timings["embed"] = _ms(started)
    pool = _pool_size(request.limit)
    log: list[dict[str, Any]] = []
    retention: list[float] = []  # retention (s) of the classes of the excluded records the log quotes
    items: list[Ranked] = []
    memory_candidates = 0
    if MEMORY in request.include:
        namespaces = _narrowed(scope, request, log, dropped)
        if namespaces is None or namespaces:
            filters = legs.Filters(namespaces=namespaces, kinds=request.kinds, types=request.types,
                                   fields=_as_list(request.filters.get("fields"), "fields"),
                                   source_types=_as_list(request.filters.get("source_types"), "source_types"))
            items.extend(_memory_candidates(scope, request, filters, vector, pool, dropped, log, retention))
            memory_candidates = len(items)
    timings["memory"] = _ms(started) - timings["embed"]
    query = RetrievalQuery(text=request.query, vector=vector, limit=pool, filters=dict(request.filters))
    for name in request.include:
        fn = provider(name)
        if name != MEMORY and fn is not None:
            items.extend(_provider_item(i) for i in fn(scope, query))
    timings["sources"] = round(_ms(started) - timings["embed"] - timings["memory"], 3)
    now = timezone.now()
    # Every embedded record of the scope is a candidate of the semantic leg, so fewer candidates than the pool means a
    # memory of fewer records than that: too few for BM25's IDF to tell a common word from a rare one (ranking.py).
    small_memory = 0 < memory_candidates < pool
    mark_names(request.query, items)
    for item in items:
        score(item, now, small_memory=small_memory)
    classify(items)
    items.sort(key=lambda i: (-i.score, i.item_id))
    packets, used = _select(items, request, embedder, dropped)
    timings["total"] = _ms(started)
    timings["budget"] = round(timings["total"] - timings["embed"] - timings["memory"] - timings["sources"], 3)
    retention += [i.extra["retention"] for i in items if i.extra.get("retention")]
    budget = {"limit": request.budget_tokens, "used": used}
    log_id = retrieval_log_record(
        scope=scope, query=request.query, request=_request_json(request),
        candidates=log + [_log_entry(i) for i in items], budget=budget, dropped=dropped, timings=timings,
        retention=dt.timedelta(seconds=min(retention)) if retention else None,
    )
    # The log's own write is timed for the metrics only: the log row cannot hold its own duration.
    metrics.retrieve_stages({stage: timings[stage] for stage in ("embed", "memory", "sources", "budget")}
                            | {"log": _ms(started) - timings["total"]})
    degraded = ["semantic_unavailable"] if "semantic_unavailable" in dropped else []
    return RetrieveResult(retrieval_id=log_id, packets=packets, budget=budget, dropped=dropped, degraded=degraded)


def _select(items: list[Ranked], request: RetrieveRequest, embedder: Any,
            dropped: dict[str, int]) -> tuple[list[dict[str, Any]], int]:
    packets: list[dict[str, Any]] = []
    used = 0
    seen: set[str] = set()
    full = False
    for item in items:
        if below_threshold(item):
            item.reason = "below_threshold"
        elif item.dedupe_key in seen:
            item.reason = "duplicate"
        elif full:
            item.reason = "budget"
        elif len(packets) >= request.limit:
            item.reason = "limit"
        else:
            item.tokens = embedder.count_tokens(item.text)
            if used + item.tokens > request.budget_tokens:
                # Stop adding: the caller asked for the best packets that fit, in order.
                item.reason, full = "budget", True
            else:
                used += item.tokens
                item.selected = True
                seen.add(item.dedupe_key)
                packets.append(_packet(item))
                continue
        dropped[item.reason] = dropped.get(item.reason, 0) + 1
    return packets, used


def _packet(item: Ranked) -> dict[str, Any]:
    packet = dict(item.packet)
    if item.source != MEMORY:
        packet["text"] = item.text
        packet["source_date"] = item.source_date.date().isoformat() if item.source_date else None
    packet["score"] = round(item.score, 4)
    packet["match"] = item.match
    packet["tokens"] = item.tokens
    packet["content_role"] = "data"  # memory is data for the model, never instructions
    # Served as it was said, but marked when it reads like instructions aimed at the model.
    packet["flags"] = content_flags(item.text)
    return packet


def _log_entry(item: Ranked) -> dict[str, Any]:
    # A memory entry keeps no text: readers of the log see the record's text while the record exists
    # (memory/retrieval/selectors.py ``with_record_texts``), so a log never holds a copy of a record.
    entry: dict[str, Any] = {"source": item.source, "id": item.item_id,
                             "lexical_rank": item.lexical_rank, "semantic_rank": item.semantic_rank,
                             "similarity": None if item.similarity is None else round(item.similarity, 4),
                             "lexical": None if item.lexical is None else round(item.lexical, 4),
                             "relevance": round(item.relevance, 4), "score": round(item.score, 4),
                             "match": item.match, "names": item.names_match,
                             "tokens": item.tokens or None, "selected": item.selected, "reason": item.reason,
                             "authority": item.authority}
    if item.source == MEMORY:
        entry["memory_id"] = item.item_id
        entry["namespace"] = to_list(item.extra["namespace"])
        entry["status"] = item.packet["status"]
    else:
        entry["text"] = item.text
        entry["grant"] = item.extra.get("grant")  # who may see the entry (memory/retrieval/selectors.py)
    return entry


def _request_json(request: RetrieveRequest) -> dict[str, Any]:
    return {"namespaces": request.namespaces, "kinds": request.kinds, "types": request.types,
            "filters": request.filters, "budget_tokens": request.budget_tokens, "limit": request.limit,
            "include": list(request.include)}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
