"""Fusion and reranking: reciprocal rank fusion of the legs, then authority, confidence and recency.

RRF needs no score calibration between full-text ranks and cosine distances (or between memory and
the other sources), which is why it fuses. The final score stays in [0, 1]:

    score = 0.75 * relevance + 0.10 * authority + 0.10 * confidence + 0.05 * recency

relevance = 0.5 * RRF (the sum over legs of 1/(60 + rank), divided by its maximum, first in both
legs) + 0.5 * the cosine similarity, so that rank position and absolute closeness both count (RRF
alone scores the best of several unrelated records as high as a true match); authority follows the
precedence order (system_of_record 1.0 ... summary 0.0); a served candidate weighs 0.3 against a
confirmed record's 1.0; recency halves every 180 days. Relevance dominates on purpose: authority
and confidence order near-ties, they do not lift an unrelated record above a relevant one.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from memory.policy.precedence import AUTHORITY_ORDER

RRF_K = 60
W_RELEVANCE, W_AUTHORITY, W_CONFIDENCE, W_RECENCY = 0.75, 0.10, 0.10, 0.05
RECENCY_HALF_LIFE_DAYS = 180.0
# A candidate seen only by the vector leg below this cosine similarity is noise, not a match.
MIN_SIMILARITY = 0.25


@dataclass
class Ranked:
    source: str  # "memory" or a provider's include name
    item_id: str
    text: str
    packet: dict[str, Any]
    authority: str
    confirmed: bool
    source_date: dt.datetime | None
    dedupe_key: str
    lexical_rank: int | None = None
    semantic_rank: int | None = None
    similarity: float | None = None
    memory_class_id: int | None = None
    score: float = 0.0
    relevance: float = 0.0
    tokens: int = 0
    selected: bool = False
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def rrf(*ranks: int | None) -> float:
    return sum(1.0 / (RRF_K + r) for r in ranks if r is not None)


def authority_weight(source_type: str) -> float:
    if source_type not in AUTHORITY_ORDER:
        return 0.0
    return 1.0 - AUTHORITY_ORDER.index(source_type) / (len(AUTHORITY_ORDER) - 1)


def recency_weight(when: dt.datetime | None, now: dt.datetime) -> float:
    if when is None:
        return 0.0
    age_days = max((now - when).total_seconds(), 0.0) / 86400.0
    return float(0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS))


def score(item: Ranked, now: dt.datetime) -> None:
    closeness = max(item.similarity or 0.0, 0.0)
    item.relevance = 0.5 * rrf(item.lexical_rank, item.semantic_rank) / rrf(1, 1) + 0.5 * closeness
    item.score = (W_RELEVANCE * item.relevance + W_AUTHORITY * authority_weight(item.authority)
                  + W_CONFIDENCE * (1.0 if item.confirmed else 0.3) + W_RECENCY * recency_weight(item.source_date, now))


def below_threshold(item: Ranked) -> bool:
    return item.lexical_rank is None and (item.similarity is None or item.similarity < MIN_SIMILARITY)
