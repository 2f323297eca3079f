"""Retrieval through more than one matching record: a second hop, and people the question names.

A question whose answer is spread over several records often names only what the first of them says: "What did
her brother give her when she moved?" finds the turn about the move, and the turn about the gift says "Tom" and
"lamp", not "brother" or "moved". The **second hop** asks again with the question expanded by the text of the
first round's best records (``HOP_RECORDS`` of them): their words join the lexical leg (``"lexical"``), their
text joins the question's embedding (``"semantic"``), or both (``"both"``). Each record's relevance is then
``(1 - HOP_WEIGHT) * first round + HOP_WEIGHT * second round`` (ranking.relevance); a record only the second round
found stands in for its first-round relevance with the lowest of the first round's pool, since it was not in it,
and carries no similarity or lexical share of its own: it is never "strong" by itself (ranking.classify).

**Names** (``NAME_BONUS``): a question that names a person ("What did Anna paint?") is most often answered by what
that person said or what was said about them. A capitalised word that does not start a sentence is taken as a name,
and a record that contains it gets the bonus on its relevance. Nothing here knows any particular name, speaker
format or data set.

Every choice is a setting (``ENGRAM_RECALL_HOP``, ``_HOP_RECORDS``, ``_HOP_WEIGHT``, ``_NAME_BONUS``); what was
measured for each is in docs/retrieval.md ("More than one matching record").
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence

from django.conf import settings

from memory.embedder_guard import EmbedderUnavailable
from memory.retrieval import candidates as legs
from memory.retrieval.context import SESSION_GAP_MINUTES
from memory.retrieval.ranking import MIN_SIMILARITY, Ranked, own_relevance
from memory.scope import Scope

_TUNING = settings.ENGRAM_RECALL
HOP = settings.ENGRAM_RECALL_HOP  # one of HOPS
HOP_RECORDS = int(_TUNING["hop_records"])
NAME_BONUS = float(_TUNING["name_bonus"])
SPREAD = float(_TUNING["spread"])
# A conversation session: event times no further apart than the context windows' session gap (context.py).
SESSION_GAP = dt.timedelta(minutes=SESSION_GAP_MINUTES)
HOPS = ("off", "lexical", "semantic", "both")
if HOP not in HOPS:
    raise ValueError(f"ENGRAM_RECALL_HOP is one of {', '.join(HOPS)}")

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def hop_enabled() -> bool:
    return HOP != "off" and HOP_RECORDS > 0


def second_hop(scope: Scope, filters: legs.Filters, query: str, vector: list[float], first: Sequence[Ranked], *,
               pool: int, limit: int, knee: float, embed: Callable[[str], list[float]],
               as_item: Callable[[legs.Candidate], Ranked]) -> list[Ranked]:
    """Ask again with ``query`` expanded by the best of ``first`` (the memory items of the first round); set each
    first-round item's ``hop`` and return the records only the second round found, as items."""
    if not first:
        return []
    best = sorted(first, key=lambda i: (-own_relevance(i, knee), i.item_id))[:HOP_RECORDS]
    expanded = "\n".join([query, *(i.text for i in best)])
    hop_vector = vector
    if HOP in ("both", "semantic") and vector:
        try:
            hop_vector = embed(expanded)
        except EmbedderUnavailable:
            hop_vector = vector
    words = query if HOP == "semantic" else expanded
    found = legs.search(scope, filters, words, hop_vector, pool=pool, limit=limit,
                        max_distance=1.0 - MIN_SIMILARITY).candidates
    if not found:
        return []
    second = {c.row["id"]: float(c.relevance) for c in found}
    unseen_second = min(second.values())
    unseen_first = min(own_relevance(i, knee) for i in first)
    known = set()
    for item in first:
        item.hop = second.get(item.item_id, unseen_second)
        known.add(item.item_id)
    added = []
    for candidate in found:
        if candidate.row["id"] in known:
            continue
        item = as_item(candidate)
        # Its legs' scores answer the expanded question, not the one asked: only the blend speaks for it.
        item.similarity = item.lexical = None
        item.lexical_rank = item.semantic_rank = None
        item.base, item.hop = unseen_first, second[item.item_id]
        item.extra["hop"] = True
        added.append(item)
    return added


def named(query: str) -> set[str]:
    """Lower-cased capitalised words of ``query`` that do not start a sentence (a possessive's "'s" removed)."""
    names: set[str] = set()
    for sentence in _SENTENCE.split(query.strip()):
        for word in _WORD.findall(sentence)[1:]:
            if word[0].isupper() and len(word) > 1 and not word.isupper():
                names.add(re.sub(r"['’]s$", "", word).lower())
    return names


def name_bonus(query: str, items: Sequence[Ranked]) -> None:
    """Give the bonus to every item that contains a name the question contains."""
    if NAME_BONUS <= 0:
        return
    names = named(query)
    if not names:
        return
    for item in items:
        words = {w.lower() for w in _WORD.findall(item.text)}
        words |= {re.sub(r"['’]s$", "", w) for w in words}
        if names & words:
            item.bonus = NAME_BONUS


def spread(items: list[Ranked]) -> None:
    """Lower each memory item's score by SPREAD for every better-scored item of the same session: a question whose
    answer lies in several threads gets more than one of them among the first packets, instead of one thread's
    neighbouring turns (which share their window's words and vector, so they score alike)."""
    if SPREAD <= 0:
        return
    better: list[tuple[str, str, dt.datetime]] = []
    for item in sorted(items, key=lambda i: (-i.score, i.item_id)):
        at = item.extra.get("at")
        if at is None:
            continue
        thread = (str(item.extra.get("namespace")), str(item.packet.get("kind")))
        same = sum(1 for ns, kind, when in better if (ns, kind) == thread and abs(when - at) <= SESSION_GAP)
        better.append((*thread, at))
        item.score -= SPREAD * same
