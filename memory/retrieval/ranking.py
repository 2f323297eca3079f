"""Fusion and reranking: relevance from both legs' absolute scores, then authority, confidence and recency.

    relevance = W_LEXICAL * evidence * gate + W_SEMANTIC * max(similarity, 0)    (in [0, 1])
    evidence  = lexical * min(1, lexical / LEXICAL_KNEE) in a memory smaller than the pool, else lexical
    gate      = min(1, max(similarity, 0) / GATE_SIMILARITY), or 1 while the similarity is unknown
    score     = 0.75 * relevance + 0.10 * authority + 0.10 * confidence + 0.05 * recency

``lexical`` is BM25 divided by its ceiling for the query (candidates.py): the share of the query's
information a record carries, comparable across queries and corpora of any size. ``similarity`` is the
cosine similarity (for a windowed episodic record, blended with its window's). Both are absolute, so
fusion keeps how *strong* each match is, where reciprocal rank fusion kept only the order: with RRF a
record sharing one common word with the query was "rank 1" of the lexical leg and could beat a strong
paraphrase; here it carries almost no lexical score and the paraphrase's similarity decides. The gate
trusts lexical evidence in proportion to how plausibly the record is about the question at all: in a
handful of records every word is "rare", and a shared "keep" or "like" in an unrelated record is a
coincidence, not evidence.

Other sources (summaries, procedures, knowledge) report ranks and a similarity; their lexical share is
taken from their lexical rank (PROVIDER_LEXICAL_TOP at rank 1, decaying like 1/(k + rank)), unless the
provider reports its own ``lexical_score`` in [0, 1].

*Evidence below the knee, in small memories.* In a memory smaller than the candidate pool, BM25's IDF cannot tell a
common word from a rare one (every word is in one or two of a few dozen records), so a record that carries only a
small share of the question's information (one common word of several: "like" in "What does she like doing to keep
fit?" against "Likes hotels with a gym") has its lexical share scaled down in proportion (0.07 counts as 0.01 with
the knee at 0.5): one shared word no longer outweighs a clearly stronger semantic match, and a record carrying at
least LEXICAL_KNEE of the question counts fully. In larger memories IDF does its job and the share counts as it is:
measured under the two-fold protocol, every knee lost LoCoMo recall on both halves (docs/retrieval.md). The SQL
statement selects the candidate pool with the plain share; this rescoring orders the pool.

*Strong, weak, or below the line* (``classify``): there is no absolute floor. A record is a **strong** match when the
legs agree on it (it carries at least STRONG_LEXICAL of the question's information and is at least GATE_SIMILARITY
similar) or its similarity alone is at least STRONG_SIMILARITY. Anything else is **weak**, and it is served when it
carries any of the question's words (its place in the order already says how much), or when it stands out from what
this subject holds for this question: relevance at least ``median + LINE_FRACTION * (best - median)`` over the
candidates, or similarity at least the same line drawn over their similarities (a shared word lifts the best
relevance, and the relevance line with it, above an answer said in other words). The best candidate, and the best
by meaning, always clear those lines, so a subject that holds something never answers empty: short everyday
questions often have a low absolute cosine with MiniLM even against their answer ("what does she do for a living"
against "Works night shifts at the children's hospital"), which an absolute floor dropped.
A question about something never said gets at most a few weak matches, marked ``"match": "weak"`` in the packet.

Authority follows the precedence order (system_of_record 1.0 ... summary 0.0); a served candidate weighs
0.3 against a confirmed record's 1.0; recency halves every 180 days. Relevance dominates on purpose:
authority and confidence order near-ties, they do not lift an unrelated record above a relevant one.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from memory.policy.precedence import AUTHORITY_ORDER
from memory.retrieval.candidates import GATE_SIMILARITY, W_LEXICAL, W_SEMANTIC

RRF_K = 60
PROVIDER_LEXICAL_TOP = 0.3  # about the lexical share of a memory leg's best match on a typical question
W_RELEVANCE, W_AUTHORITY, W_CONFIDENCE, W_RECENCY = 0.75, 0.10, 0.10, 0.05
RECENCY_HALF_LIFE_DAYS = 180.0
# Explanations only: a record that may not be served is reported among the dropped when it shares a query word or
# is at least this similar (candidates.py ``excluded``). Serving has no absolute floor: see ``classify``.
MIN_SIMILARITY = 0.25
_TUNING = settings.ENGRAM_RECALL
LEXICAL_KNEE = float(_TUNING["lexical_knee"])
LINE_FRACTION = float(_TUNING["line_fraction"])
SIMILARITY_LINE = bool(_TUNING["similarity_line"])
STRONG_SIMILARITY = float(_TUNING["strong_similarity"])
STRONG_LEXICAL = float(_TUNING["strong_lexical"])
NAME_BONUS = float(_TUNING["name_bonus"])
STRONG, WEAK = "strong", "weak"


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
    lexical: float | None = None  # the lexical share in [0, 1]; None: no query word in it
    memory_class_id: int | None = None
    score: float = 0.0
    relevance: float = 0.0
    tokens: int = 0
    selected: bool = False
    reason: str | None = None
    match: str | None = None  # STRONG, WEAK, or None: below this question's line (classify)
    names_match: bool = False  # it contains a name the question contains (names.py): NAME_BONUS more relevance
    extra: dict[str, Any] = field(default_factory=dict)


def rrf(*ranks: int | None) -> float:
    return sum(1.0 / (RRF_K + r) for r in ranks if r is not None)


def lexical_share(item: Ranked) -> float:
    if item.lexical is not None:
        return min(max(item.lexical, 0.0), 1.0)
    if item.lexical_rank is None:
        return 0.0
    return PROVIDER_LEXICAL_TOP * rrf(item.lexical_rank) / rrf(1)


def relevance(item: Ranked, knee: float = 0.0) -> float:
    similarity = max(item.similarity or 0.0, 0.0)
    # No similarity known (embedding pending, or a lexical-only source): nothing to gate the words by.
    gate = 1.0 if item.similarity is None else min(1.0, similarity / GATE_SIMILARITY)
    found = W_LEXICAL * lexical_evidence(item, knee) * gate + W_SEMANTIC * similarity
    return min(found + (NAME_BONUS if item.names_match else 0.0), 1.0)


def lexical_evidence(item: Ranked, knee: float = 0.0) -> float:
    """The lexical share, scaled down below ``knee``: one common word of several is a hint, not evidence."""
    share = lexical_share(item)
    return share * min(1.0, share / knee) if knee > 0 else share


def authority_weight(source_type: str) -> float:
    if source_type not in AUTHORITY_ORDER:
        return 0.0
    return 1.0 - AUTHORITY_ORDER.index(source_type) / (len(AUTHORITY_ORDER) - 1)


def recency_weight(when: dt.datetime | None, now: dt.datetime) -> float:
    if when is None:
        return 0.0
    age_days = max((now - when).total_seconds(), 0.0) / 86400.0
    return float(0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS))


def score(item: Ranked, now: dt.datetime, *, small_memory: bool = False) -> None:
    """``small_memory``: the scope holds fewer records than the candidate pool (the knee applies; see above)."""
    item.relevance = relevance(item, LEXICAL_KNEE if small_memory else 0.0)
    item.score = (W_RELEVANCE * item.relevance + W_AUTHORITY * authority_weight(item.authority)
                  + W_CONFIDENCE * (1.0 if item.confirmed else 0.3) + W_RECENCY * recency_weight(item.source_date, now))


def words_agree(item: Ranked) -> bool:
    """The record has query words and a meaning plausibly about the question (or no similarity known yet)."""
    return lexical_share(item) > 0.0 and (item.similarity is None or item.similarity >= GATE_SIMILARITY)


def is_strong(item: Ranked) -> bool:
    if item.similarity is not None and item.similarity >= STRONG_SIMILARITY:
        return True
    return lexical_share(item) >= STRONG_LEXICAL and words_agree(item)


def _line(values: Sequence[float]) -> float:
    """What stands out from these candidates: ``LINE_FRACTION`` of the way from their median to their best."""
    best, background = max(values), statistics.median(values)
    return background + LINE_FRACTION * (best - background)


def classify(items: Sequence[Ranked]) -> None:
    """Set each scored item's ``match``: strong, weak, or None (below the line of what this subject holds)."""
    if not items:
        return
    line = _line([i.relevance for i in items])
    # The same line over the similarities alone: a record that shares a question word ("living" in "What does she
    # do for a living?" and "Reads in the living room") lifts the best relevance, and with it the relevance line,
    # above the record that answers in other words; its meaning still stands out among the meanings.
    similarities = [i.similarity for i in items if i.similarity is not None]
    meaning_line = _line(similarities) if SIMILARITY_LINE and similarities else None
    for item in items:
        if is_strong(item):
            item.match = STRONG
        elif (lexical_share(item) > 0.0 or item.relevance >= line
              or (meaning_line is not None and item.similarity is not None and item.similarity >= meaning_line)):
            item.match = WEAK
        else:
            item.match = None


def below_threshold(item: Ranked) -> bool:
    return item.match is None
