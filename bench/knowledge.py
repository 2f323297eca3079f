"""Knowledge retrieval benchmark: N chunks in D access domains, p50/p95 of the provider and of mixed retrieval.

    .venv/bin/python bench/knowledge.py --chunks 50000 --domains 20 --queries 200

Runs against its own database (default ``engram_bench_knowledge`` on the embedded server, or the
server of DATABASE_URL), never the app database. Data is realistic enough for ANN/FTS behaviour:
a pool of generated sentences over 40 topics is embedded once with the real model; each chunk
is three sentences of one topic and its vector the normalised mean of theirs (clustered, like
real documents). Documents go in with bulk_create, chunks with binary COPY (STACK_NOTES: COPY is
~350x faster than bulk_create into indexed tables), then one UPDATE fills the full-text vectors.

Measured: the knowledge provider alone (one SQL statement, both legs) for principals reading 1,
5 and all D domains, and POST /api/v1/retrieve with include ["memory", "knowledge"] through the
real API stack (in-process test client; includes the query embedding, auth and the retrieval log).
Results: a table on stdout and JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPICS = ["billing", "refunds", "shipping", "vpn", "onboarding", "payroll", "security", "incidents", "deploys",
          "databases", "backups", "pricing", "contracts", "hiring", "travel", "expenses", "laptops", "printers",
          "wifi", "email", "calendar", "support", "escalation", "sla", "api", "webhooks", "mobile", "search",
          "analytics", "invoices", "taxes", "compliance", "privacy", "retention", "audits", "vendors", "legal",
          "marketing", "design", "accessibility"]
VERBS = ["requires", "explains", "covers", "describes", "limits", "allows", "blocks", "schedules", "reviews",
         "tracks", "rotates", "archives", "approves", "escalates", "measures"]
OBJECTS = ["approval from a manager", "a ticket in the queue", "the quarterly review", "a signed form",
           "the on-call engineer", "two business days", "the regional office", "a security check",
           "the finance team", "an automated job", "the customer portal", "a written summary", "the audit log",
           "the staging environment", "a backup copy"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--domains", type=int, default=20)
    parser.add_argument("--chunks-per-document", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=20, help="candidates per leg")
    parser.add_argument("--memories", type=int, default=100, help="memory records of the mixed-retrieval principal")
    parser.add_argument("--database", default="engram_bench_knowledge")
    parser.add_argument("--reuse", action="store_true", help="keep data loaded by a previous run of the same size")
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args()


def setup_django(database: str) -> None:
    os.environ["ENGRAM_DB_NAME"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ENGRAM_LOG_LEVEL", "WARNING")
    if not os.environ.get("DATABASE_URL"):
        from config.embedded_db import ensure_server

        ensure_server(ROOT, database=database)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def sentences(rng: random.Random) -> list[tuple[int, str]]:
    pool = []
    for t, topic in enumerate(TOPICS):
        for _ in range(25):
            pool.append((t, f"The {topic} policy {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                            f"for {rng.choice(TOPICS)} cases number {rng.randint(1, 999)}."))
    return pool


def load(args: argparse.Namespace, rng: random.Random) -> dict:
    import numpy as np
    from django.db import connection
    from django.utils import timezone
    from pgvector.psycopg import register_vector

    from memory.embedder import get_embedder
    from memory.knowledge.models import AccessDomain, Chunk, Document
    from memory.knowledge.services import access_domain_create
    from memory.models import Tenant
    from memory.services.identity import subject_get_or_create, tenant_create

    tenant = Tenant.objects.filter(slug="bench-knowledge").first()
    if args.reuse and tenant and Chunk.objects.filter(access_domain__tenant=tenant).count() == args.chunks \
            and AccessDomain.objects.filter(tenant=tenant).count() == args.domains:
        return {"tenant": tenant, "load_seconds": None}
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE knowledge_chunk, knowledge_document, knowledge_accessdomain_readers, "
                       "knowledge_accessdomain, retrieval_retrievallog CASCADE")
    if tenant is None:
        tenant = tenant_create(slug="bench-knowledge")
    one, five, every = (subject_get_or_create(tenant=tenant, external_id=f"usr_reads_{n}") for n in ("1", "5", "all"))
    domains = []
    for d in range(args.domains):
        readers = ["usr_reads_all"] + (["usr_reads_5"] if d < 5 else []) + (["usr_reads_1"] if d == 0 else [])
        domains.append(access_domain_create(tenant=tenant, name=f"domain-{d:02d}", subject_external_ids=readers))
    pool = sentences(rng)
    t0 = time.perf_counter()
    vectors = np.array(get_embedder().embed([s for _, s in pool]), dtype=np.float32)
    embed_seconds = time.perf_counter() - t0
    by_topic: dict[int, list[int]] = {}
    for i, (t, _) in enumerate(pool):
        by_topic.setdefault(t, []).append(i)
    n_docs = args.chunks // args.chunks_per_document
    now = timezone.now()
    docs = Document.objects.bulk_create([
        Document(tenant=tenant, access_domain=domains[i % args.domains], external_id=f"doc-{i}",
                 title=f"{TOPICS[i % len(TOPICS)].title()} handbook part {i}", content_hash=f"{i:064d}",
                 ingested_at=now, char_count=0)
        for i in range(n_docs)], batch_size=2000)
    t0 = time.perf_counter()
    conn = connection.connection
    register_vector(conn)
    with conn.cursor() as cur, cur.copy(
            "COPY knowledge_chunk (document_id, access_domain_id, ordinal, text, char_start, char_end, "
            "token_count, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "int4", "text", "int4", "int4", "int4", "vector"])
        written = 0
        for i, doc in enumerate(docs):
            topic = i % len(TOPICS)
            for ordinal in range(args.chunks_per_document):
                picks = rng.sample(by_topic[topic], 3)
                text = " ".join(pool[p][1] for p in picks)
                vec = vectors[picks].mean(axis=0)
                vec /= np.linalg.norm(vec)
                copy.write_row([doc.pk, doc.access_domain_id, ordinal, text, 0, len(text), 40, vec])
                written += 1
    copy_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE knowledge_chunk c SET search_vector = setweight(to_tsvector('english', d.title), 'B') "
                       "|| setweight(to_tsvector('english', c.text), 'A') FROM knowledge_document d "
                       "WHERE d.id = c.document_id")
        cursor.execute("ANALYZE knowledge_chunk")
        cursor.execute("ANALYZE knowledge_document")
    fts_seconds = time.perf_counter() - t0
    return {"tenant": tenant, "subjects": (one, five, every), "load_seconds": round(time.perf_counter() - started, 1),
            "pool_embed_seconds": round(embed_seconds, 1), "copy_seconds": round(copy_seconds, 1),
            "copy_rows_per_second": round(written / copy_seconds), "fts_update_seconds": round(fts_seconds, 1)}


def queries(n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        topic = rng.choice(TOPICS)
        out.append(rng.choice([f"{topic} {rng.choice(VERBS)} {rng.choice(OBJECTS)}",
                               f"what does the {topic} policy say about {rng.choice(OBJECTS)}",
                               f"{topic} {rng.choice(TOPICS)} cases"]))
    return out


def bench_provider(tenant, texts: list[str], limit: int) -> dict:
    from memory.embedder import get_embedder
    from memory.knowledge.models import AccessDomain, Chunk
    from memory.knowledge.retrieval_provider import knowledge_search
    from memory.models import Subject
    from memory.retrieval.sources import RetrievalQuery
    from memory.scope import Scope

    embedder = get_embedder()
    vectors = embedder.embed(texts)
    rows = {}
    for label, external_id in (("reads 1 domain", "usr_reads_1"), ("reads 5 domains", "usr_reads_5"),
                               ("reads all domains", "usr_reads_all")):
        subject = Subject.objects.get(tenant=tenant, external_id=external_id)
        scope = Scope(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=external_id,
                      permissions=frozenset({"read"}), namespaces=None, actor="bench")
        readable = Chunk.objects.filter(access_domain__in=AccessDomain.objects.filter(readers=subject)).count()
        times, underfilled, leaked = [], 0, 0
        allowed = set(AccessDomain.objects.filter(readers=subject).values_list("name", flat=True))
        knowledge_search(scope, RetrievalQuery(text=texts[0], vector=vectors[0], limit=limit))  # warm
        for text, vector in zip(texts, vectors, strict=True):
            t0 = time.perf_counter()
            items = knowledge_search(scope, RetrievalQuery(text=text, vector=vector, limit=limit))
            times.append((time.perf_counter() - t0) * 1000)
            if sum(1 for i in items if i.semantic_rank) < min(limit, readable):
                underfilled += 1
            leaked += sum(1 for i in items if i.packet["access_domain"] not in allowed)
        rows[label] = {"readable_chunks": readable, "p50_ms": round(pct(times, 0.5), 1),
                       "p95_ms": round(pct(times, 0.95), 1), "semantic_underfilled": underfilled, "leaked": leaked}
    return rows


def bench_api(tenant, texts: list[str], memories: int) -> dict:
    from django_q.conf import Conf
    from rest_framework.test import APIClient

    from memory.services.identity import agent_key_create, principal_token_mint

    _, key = agent_key_create(tenant=tenant, name="bench", permissions=["read", "write"])
    token, _, _ = principal_token_mint(tenant=tenant, subject_external_id="usr_reads_5", ttl=3600)
    client = APIClient()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}", "HTTP_X_ENGRAM_PRINCIPAL": token}
    Conf.SYNC = True  # embed the seeded memories in-process
    rng = random.Random(3)
    for i in range(memories):
        topic = rng.choice(TOPICS)
        client.post("/api/v1/memories", {
            "namespace": ["user", "travel_preferences"], "kind": "preference",
            "fact": {"field": f"{topic}_note_{i}", "value": f"{topic} {rng.choice(OBJECTS)}"},
            "text": f"Prefers the {topic} policy to cover {rng.choice(OBJECTS)}",
            "source": {"type": "explicit_user_statement", "event_id": f"evt_bench_{i}"}}, format="json", **headers)
    Conf.SYNC = False
    times, knowledge_share, statuses = [], [], set()
    for text in texts:
        t0 = time.perf_counter()
        response = client.post("/api/v1/retrieve", {"query": text, "include": ["memory", "knowledge"],
                                                    "budget_tokens": 400, "limit": 10}, format="json", **headers)
        times.append((time.perf_counter() - t0) * 1000)
        statuses.add(response.status_code)
        packets = response.json().get("packets", [])
        if packets:
            knowledge_share.append(sum(1 for p in packets if p.get("kind") == "knowledge") / len(packets))
    return {"principal": "reads 5 domains + own memories", "memories": memories, "statuses": sorted(statuses),
            "p50_ms": round(pct(times, 0.5), 1), "p95_ms": round(pct(times, 0.95), 1),
            "knowledge_share_of_packets": round(statistics.mean(knowledge_share), 2) if knowledge_share else None}


def main() -> None:
    args = parse_args()
    setup_django(args.database)
    from rich.console import Console
    from rich.table import Table

    rng = random.Random(args.seed)
    loaded = load(args, rng)
    tenant = loaded.pop("tenant")
    loaded.pop("subjects", None)
    texts = queries(args.queries, rng)
    provider_rows = bench_provider(tenant, texts, args.limit)
    api_row = bench_api(tenant, texts, args.memories)

    table = Table(title=f"knowledge: {args.chunks} chunks in {args.domains} domains, {args.queries} queries, "
                        f"limit {args.limit}/leg")
    for column in ("what", "readable chunks", "p50 ms", "p95 ms", "under-filled", "leaked"):
        table.add_column(column)
    for label, row in provider_rows.items():
        table.add_row(f"provider, {label}", str(row["readable_chunks"]), str(row["p50_ms"]), str(row["p95_ms"]),
                      str(row["semantic_underfilled"]), str(row["leaked"]))
    table.add_row("POST /retrieve memory+knowledge", "", str(api_row["p50_ms"]), str(api_row["p95_ms"]), "", "")
    console = Console(width=120)
    console.print(table)
    console.print({"load": loaded, "api": api_row})
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = results / f"knowledge-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"args": vars(args), "load": loaded, "provider": provider_rows, "api": api_row},
                              indent=2))
    console.print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
