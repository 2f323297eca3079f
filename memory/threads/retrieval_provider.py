"""``include: ["summaries"]``: fresh thread summaries of the principal's subject, with their source range.

Lexical leg only: Postgres full-text search over ``Summary.search_vector`` (GIN), any query word
matching (OR of the words' lexemes), ranked by ``ts_rank_cd`` over the scoped, fresh matches. The
tenant, subject and status predicates are in the same WHERE clause, so a stale summary is out of
retrieval from the instant it is marked stale. Optional narrowing filter: ``filters["thread_id"]``.
"""

from __future__ import annotations

import re

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F

from memory.models import SourceType
from memory.retrieval.sources import RetrievalQuery, SourceItem, register_provider
from memory.scope import Scope
from memory.threads.models import Summary

TEXT_SEARCH_CONFIG = "english"
_WORD = re.compile(r"\w+", re.UNICODE)


def _or_query(text: str) -> SearchQuery | None:
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:32]
    if not words:
        return None
    query = SearchQuery(words[0], config=TEXT_SEARCH_CONFIG)
    for word in words[1:]:
        query |= SearchQuery(word, config=TEXT_SEARCH_CONFIG)
    return query


def summaries_search(scope: Scope, query: RetrievalQuery) -> list[SourceItem]:
    tsquery = _or_query(query.text)
    if tsquery is None:
        return []
    qs = Summary.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                status=Summary.Status.FRESH, search_vector=tsquery)
    thread_id = query.filters.get("thread_id") if isinstance(query.filters, dict) else None
    if thread_id:
        qs = qs.filter(thread_id=str(thread_id))
    rows = (qs.annotate(rank=SearchRank(F("search_vector"), tsquery, cover_density=True))
            .order_by("-rank", "-created_at", "pk")[: max(1, int(query.limit))])
    return [
        SourceItem(
            source="summaries", item_id=s.pk, text=s.text,
            packet={"kind": "summary", "thread_id": s.thread_id, "summary_id": s.pk,
                    "source_range": {"from_seq": s.from_seq, "to_seq": s.to_seq}, "status": s.status,
                    "summarizer": {"name": s.summarizer_name, "version": s.summarizer_version},
                    "unresolved": s.unresolved, "referenced_event_ids": s.referenced_event_ids,
                    "content_role": "data"},
            lexical_rank=rank, source_date=s.created_at, authority=SourceType.SUMMARY,
        )
        for rank, s in enumerate(rows, start=1)
    ]


register_provider("summaries")(summaries_search)
