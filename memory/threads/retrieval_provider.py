"""``include: ["summaries"]``: fresh thread summaries of the principal's subject, with their source range.

- Lexical leg: Postgres full-text search over ``Summary.search_vector`` (GIN), any query word
  matching (memory/search.py), ranked by ``ts_rank_cd`` over the scoped, fresh matches.
- Semantic leg: cosine distance to the query embedding, an exact scan of the subject's fresh,
  embedded summaries (no ANN index to under-fill).
A principal whose grant does not reach ``threads`` gets none. Both legs put tenant, subject and
status in their WHERE clause, so a stale summary is out of retrieval from the instant it is marked
stale. Optional narrowing filter: ``filters["thread_id"]``.
"""

from __future__ import annotations

from django.contrib.postgres.search import SearchRank
from django.db.models import F, QuerySet
from pgvector.django import CosineDistance

from memory.models import SourceType
from memory.retrieval.sources import RetrievalQuery, SourceItem, register_provider
from memory.scope import THREADS, Scope
from memory.search import or_query
from memory.threads.models import Summary


def _scoped(scope: Scope, query: RetrievalQuery) -> QuerySet[Summary]:
    qs = Summary.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, status=Summary.Status.FRESH)
    thread_id = query.filters.get("thread_id") if isinstance(query.filters, dict) else None
    return qs.filter(thread_id=str(thread_id)) if thread_id else qs


def _item(s: Summary) -> SourceItem:
    return SourceItem(
        source="summaries", item_id=s.pk, text=s.text,
        packet={"kind": "summary", "thread_id": s.thread_id, "summary_id": s.pk,
                "source_range": {"from_seq": s.from_seq, "to_seq": s.to_seq}, "status": s.status,
                "summarizer": {"name": s.summarizer_name, "version": s.summarizer_version},
                "unresolved": s.unresolved, "referenced_event_ids": s.referenced_event_ids,
                "content_role": "data"},
        source_date=s.created_at, authority=SourceType.SUMMARY, grant=THREADS,
    )


def summaries_search(scope: Scope, query: RetrievalQuery) -> list[SourceItem]:
    if not scope.allows_namespace(THREADS):  # thread state needs a "threads" grant (memory/scope.py)
        return []
    limit = max(1, int(query.limit))
    items: dict[str, SourceItem] = {}
    tsquery = or_query(query.text)
    if tsquery is not None:
        lexical = (_scoped(scope, query).filter(search_vector=tsquery).defer("embedding")
                   .annotate(rank=SearchRank(F("search_vector"), tsquery, cover_density=True))
                   .order_by("-rank", "-created_at", "pk")[:limit])
        for rank, summary in enumerate(lexical, start=1):
            items[summary.pk] = _item(summary)
            items[summary.pk].lexical_rank = rank
    if query.vector:
        distance = CosineDistance("embedding", query.vector)
        semantic = (_scoped(scope, query).filter(embedding__isnull=False).defer("embedding")
                    .annotate(distance=distance).order_by("distance", "pk")[:limit])
        for rank, near in enumerate(semantic, start=1):
            item = items.setdefault(near.pk, _item(near))
            item.semantic_rank = rank
            item.semantic_similarity = 1.0 - float(near.distance)
    return list(items.values())


register_provider("summaries")(summaries_search)
