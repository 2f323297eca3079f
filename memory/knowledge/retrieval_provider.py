"""``include: ["knowledge"]``: chunks from the access domains the principal may read.

Both legs run in ONE SQL statement, so they read one snapshot: a document being re-versioned is
seen entirely old or entirely new, never a mix of the two legs' views. Each leg has the readable
domain predicate (access.py) inside its own WHERE clause.

- Lexical leg: ``websearch_to_tsquery`` over ``Chunk.search_vector`` (GIN), ranked by ``ts_rank_cd``
  over the scoped matches only.
- Semantic leg: cosine distance, exact scan of the readable domains' chunks, computed in a fenced
  subquery so the planner can never use an ANN index: on pgvector 0.6 a filtered HNSW scan
  returns too few rows (STACK_NOTES).

Optional narrowing filter: ``filters["access_domains"]`` (a list of domain names) restricts the
search to those of the readable domains; it can never widen it.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from memory.knowledge.access import readable_domains_sql
from memory.models import SourceType
from memory.retrieval.sources import RetrievalQuery, SourceItem, register_provider
from memory.scope import KNOWLEDGE, Scope
from memory.search import TEXT_SEARCH_CONFIG, vector_literal


def chunk_item_id(document_id: int, chunk_id: int) -> str:
    # Carries the document id so deletion can find a deleted document's quotes in retrieval logs.
    return f"doc:{document_id}:chunk:{chunk_id}"


def _sql(scope: Scope, query: RetrievalQuery) -> tuple[str, list[Any]]:
    names = query.filters.get("access_domains") if isinstance(query.filters, dict) else None
    if names is not None and not isinstance(names, list | tuple):
        names = [names]
    readable, readable_params = readable_domains_sql(scope, names=[str(n) for n in names] if names else None)
    limit = max(1, int(query.limit))
    params: list[Any] = []
    legs: list[str] = []
    lexical = query.text.strip() != ""
    semantic = bool(query.vector)
    if lexical:
        # Rank only the scoped matches, keep the top ``limit`` (a top-N sort), number them after.
        legs.append(f"""
lexical AS (
  SELECT id, row_number() OVER (ORDER BY rank DESC, id) AS lrank FROM (
    SELECT c.id, ts_rank_cd(c.search_vector, q.q) AS rank
    FROM knowledge_chunk c, websearch_to_tsquery(%s::regconfig, %s) AS q(q)
    WHERE c.access_domain_id IN ({readable}) AND c.search_vector @@ q.q
    ORDER BY rank DESC, c.id LIMIT %s) AS top)""")
        params += [TEXT_SEARCH_CONFIG, query.text, *readable_params, limit]
    else:
        legs.append("lexical AS (SELECT NULL::bigint AS id, NULL::bigint AS lrank WHERE false)")
    if semantic:
        # Exact scan: the distance is computed once per scoped row inside a fenced subquery
        # (OFFSET 0), so ordering by it can never be turned into a (filtered, under-filling) ANN
        # index scan, and a top-N sort keeps ``limit`` rows.
        legs.append(f"""
semantic AS (
  SELECT id, distance, row_number() OVER (ORDER BY distance, id) AS srank FROM (
    SELECT id, distance FROM (
      SELECT c.id, (c.embedding <=> %s::vector) AS distance
      FROM knowledge_chunk c
      WHERE c.access_domain_id IN ({readable}) AND c.embedding IS NOT NULL
      OFFSET 0) AS scan
    ORDER BY distance, id LIMIT %s) AS top)""")
        params += [vector_literal(query.vector), *readable_params, limit]
    else:
        legs.append("semantic AS (SELECT NULL::bigint AS id, NULL::float8 AS distance, "
                    "NULL::bigint AS srank WHERE false)")
    sql = "WITH " + ",".join(legs) + """
SELECT c.id, l.lrank, s.srank, s.distance, c.text, c.ordinal, c.char_start, c.char_end, c.token_count,
       d.id, d.external_id, d.title, d.version, d.ingested_at, d.uri, ad.name
FROM (SELECT id FROM lexical UNION SELECT id FROM semantic) AS hit
JOIN knowledge_chunk c ON c.id = hit.id
JOIN knowledge_document d ON d.id = c.document_id
JOIN knowledge_accessdomain ad ON ad.id = c.access_domain_id
LEFT JOIN lexical l ON l.id = hit.id
LEFT JOIN semantic s ON s.id = hit.id
ORDER BY least(coalesce(l.lrank, 1e9), coalesce(s.srank, 1e9)), c.id
"""
    return sql, params


def knowledge_search(scope: Scope, query: RetrievalQuery) -> list[SourceItem]:
    if not query.text.strip() and not query.vector:
        return []
    sql, params = _sql(scope, query)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    items = []
    for (chunk_id, lrank, srank, distance, text, ordinal, char_start, char_end, tokens,
         document_id, external_id, title, version, ingested_at, uri, domain) in rows:
        items.append(SourceItem(
            source="knowledge",
            item_id=chunk_item_id(document_id, chunk_id),
            text=text,
            packet={"kind": "knowledge", "document_id": document_id, "external_id": external_id, "title": title,
                    "chunk": ordinal, "chunk_id": chunk_id, "span": [char_start, char_end], "version": version,
                    "access_domain": domain, "uri": uri, "content_role": "data", "chunk_tokens": tokens},
            lexical_rank=lrank,
            semantic_rank=srank,
            semantic_similarity=None if distance is None else 1.0 - float(distance),
            source_date=ingested_at,
            authority=SourceType.ORG_RECORD,
            grant=f"{KNOWLEDGE}/{domain}",
        ))
    return items


register_provider("knowledge")(knowledge_search)
