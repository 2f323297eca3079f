"""Extra retrieval sources beside long-term memory: summaries, procedures, knowledge.

Each area registers a provider for its ``include`` name. The retrieval pipeline calls the
providers the request includes, with the already-verified scope, and fuses their items with the
memory candidates (reciprocal rank fusion over the ranks each provider reports), then reranks and
applies the one token budget. A provider must put every scope predicate in its own SQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memory.scope import Scope


@dataclass(frozen=True)
class RetrievalQuery:
    text: str
    vector: list[float]  # normalised query embedding (all-MiniLM-L6-v2)
    limit: int  # how many candidates each leg may return
    filters: dict[str, Any] = field(default_factory=dict)


@dataclass
class SourceItem:
    source: str  # the include name: "summaries", "procedures", "knowledge"
    item_id: str  # stable id, unique within the source (for logs and dedupe)
    text: str  # what the packet's fact/text shows and what the budget counts
    packet: dict[str, Any]  # the packet's type-specific fields (kind, status, version, ...)
    lexical_rank: int | None = None  # 1-based rank in the provider's full-text leg, None if absent
    semantic_rank: int | None = None  # 1-based rank in the provider's vector leg, None if absent
    semantic_similarity: float | None = None  # cosine similarity, when known
    source_date: dt.datetime | None = None
    authority: str = "summary"  # a precedence source type, used by reranking
    # The namespace grant a reader needs to see the item in a retrieval log (memory/scope.py), e.g.
    # "threads" or "knowledge/<domain>"; None: any reader of the subject.
    grant: str | None = None


ProviderFn = Callable[[Scope, RetrievalQuery], list[SourceItem]]
_providers: dict[str, ProviderFn] = {}


def register_provider(name: str) -> Callable[[ProviderFn], ProviderFn]:
    def register(fn: ProviderFn) -> ProviderFn:
        _providers[name] = fn
        return fn

    return register


def provider(name: str) -> ProviderFn | None:
    return _providers.get(name)


def provider_names() -> list[str]:
    return sorted(_providers)
