"""``include: ["procedures"]``: the current approved version of the procedures the scope may read.

Lexical leg only: Postgres full-text search over ``ProcedureVersion.search_vector`` (a generated
column, GIN-indexed), any query word matching, ranked by ``ts_rank_cd``. Only current versions of
procedures visible to the scope (``procedures_for_scope``: tenant, org/project membership) are
candidates, so a pending or rejected proposal can never be served. Procedures carry no embedding:
they are few, short and named, and a proposal's words must never reach retrieval before approval.
"""

from __future__ import annotations

from django.contrib.postgres.search import SearchRank
from django.db.models import F

from memory.models import SourceType
from memory.retrieval.sources import RetrievalQuery, SourceItem, register_provider
from memory.scope import Scope
from memory.search import or_query
from procedures.models import ProcedureVersion
from procedures.selectors import current_versions


def _item(v: ProcedureVersion) -> SourceItem:
    return SourceItem(
        source="procedures", item_id=f"{v.procedure.name}@v{v.number}", text=v.body,
        packet={"kind": "procedure", "name": v.procedure.name, "version": v.number, "status": "approved",
                "approved_by": v.approved_by.get_username(), "approved_at": v.approved_at.isoformat(),
                "procedure_scope": v.procedure.scope},
        source_date=v.approved_at, authority=SourceType.ORG_RECORD,
    )


def procedures_search(scope: Scope, query: RetrievalQuery) -> list[SourceItem]:
    tsquery = or_query(query.text)
    if tsquery is None:
        return []
    ranked = (current_versions(scope).filter(search_vector=tsquery)
              .annotate(rank=SearchRank(F("search_vector"), tsquery, cover_density=True))
              .order_by("-rank", "procedure__name")[: max(1, int(query.limit))])
    items = []
    for rank, version in enumerate(ranked, start=1):
        item = _item(version)
        item.lexical_rank = rank
        items.append(item)
    return items


register_provider("procedures")(procedures_search)
