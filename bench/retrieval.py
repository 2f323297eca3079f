"""Retrieval benchmark: latency of retrieve and facts (HTTP API and selector) against a naive baseline,
and the throughput of bulk writes, on a fresh database of the embedded server.

    .venv/bin/python bench/retrieval.py                      # 100,000 records across 1,000 subjects
    .venv/bin/python bench/retrieval.py --records 20000 --subjects 200 --queries 100
    .venv/bin/python bench/retrieval.py --profile knowledge  # 50,000 chunks in 20 domains, mixed retrieval

Steps: (1) drop and migrate the bench database (default ``engram_bench``; the app database is never
touched); (2) generate realistic short facts (preferences, profile facts, order ids, region codes,
trip notes), embed them in bulk with a progress bar and load them with binary COPY; (3) start
gunicorn on that database; (4) bulk writes through POST /memories/batch: with ``embed=worker`` (durable
and lexically searchable at once) and ``embed=now`` (end to end with embeddings), against the
embedder's own batched throughput measured in the same run; (5) for random subjects, time
retrieve and facts through HTTP and at the selector, and a naive baseline: an exact full-table
vector scan (and a full-table field scan for facts) with the scope filtered afterwards in Python.
Prints a table; writes JSON to bench/results/.

``--profile knowledge`` loads N chunks in D access domains (default 50,000 in 20; its own
database, ``engram_bench_knowledge``; ``--reuse`` keeps a load of the same size) and measures the
knowledge provider alone for principals reading 1, 5 and all domains, mixed retrieval (include
memory + knowledge) through HTTP and at the selector, and the naive baseline: an exact scan of every
chunk with the readable domains filtered afterwards in Python. See ``knowledge_profile`` below.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness import asked_once

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AIRPORTS = ["MUC", "LIS", "CDG", "JFK", "SFO", "NRT", "FRA", "AMS", "MAD", "ZRH", "VIE", "CPH", "DUB", "BCN"]
CITIES = ["Lisbon", "Munich", "Paris", "Porto", "Berlin", "Madrid", "Vienna", "Oslo", "Prague", "Milan", "Lyon",
          "Seville", "Krakow", "Tallinn", "Ghent", "Bologna", "Bergen", "Split", "Graz", "Turin"]
PURPOSES = ["a customer workshop", "a conference", "a team offsite", "a family visit", "a product launch",
            "a training course", "a partner meeting", "a vacation", "an audit", "a trade fair"]
REGIONS = ["eu-west-1", "eu-west-3", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1", "ap-northeast-1",
           "sa-east-1", "ca-central-1", "me-south-1"]
LANGUAGES = ["German", "Portuguese", "French", "Spanish", "Italian", "Dutch", "English", "Polish"]
MEALS = ["vegetarian", "vegan", "kosher", "halal", "gluten-free", "low-salt"]
AIRLINES = ["Lufthansa", "TAP", "KLM", "Iberia", "Swiss", "Austrian", "SAS", "Aer Lingus"]
HOTELS = ["small boutique", "business", "airport", "family-run", "design", "budget"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
TEAMS = ["payments", "search", "mobile", "platform", "data", "billing", "growth", "security"]

# (field, namespace, kind, value(rng), text(value), paraphrased query or None for "the value itself")
TOPICS: list[tuple[str, str, str, Any, Any, str | None]] = [
    ("seat_preference", "user/travel_preferences", "preference", lambda r: r.choice(["aisle", "window"]),
     lambda v: f"Prefers {v} seats", "I like sitting by the corridor on planes"),
    ("meal", "user/travel_preferences", "preference", lambda r: r.choice(MEALS),
     lambda v: f"Eats {v} meals on flights", "What food should the airline serve me?"),
    ("airline", "user/travel_preferences", "preference", lambda r: r.choice(AIRLINES),
     lambda v: f"Flies with {v} whenever possible", "Which carrier do I like to fly with?"),
    ("hotel", "user/travel_preferences", "preference", lambda r: r.choice(HOTELS),
     lambda v: f"Likes staying in {v} hotels", "What kind of accommodation should you book for me?"),
    ("home_airport", "user/profile", "profile", lambda r: r.choice(AIRPORTS),
     lambda v: f"Home airport is {v}", "Which airport do I usually depart from?"),
    ("language", "user/profile", "profile", lambda r: r.choice(LANGUAGES),
     lambda v: f"Prefers to be addressed in {v}", "Which language should you speak with me?"),
    ("home_city", "user/profile", "profile", lambda r: r.choice(CITIES),
     lambda v: f"Lives in {v}", "Where is my home?"),
    ("last_order", "project", "order", lambda r: f"ORD-{r.randint(100000, 999999)}",
     lambda v: f"Order {v} was delivered to the office", None),
    ("cloud_region", "project", "config", lambda r: r.choice(REGIONS),
     lambda v: f"Production workloads run in {v}", None),
    ("team", "project", "profile", lambda r: r.choice(TEAMS),
     lambda v: f"Works on the {v} team", "Which group of engineers do I belong to?"),
]


def trip(rng: random.Random, n: int) -> tuple[str, str, str, str, str, str]:
    # Month granularity keeps the distinct texts (what the model must embed) to a few thousand.
    city, purpose, month = rng.choice(CITIES), rng.choice(PURPOSES), rng.choice(MONTHS)
    text = f"Travelled to {city} in {month} 2026 for {purpose}"
    return f"trip_{n}", "episodes", "episode", f"{city} {month}", text, f"When did I go to {city}?"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", choices=["memory", "knowledge", "sizes"], default="memory",
                   help="memory: records, facts and bulk writes (default); knowledge: chunks and mixed retrieval; "
                        "sizes: retrieve against one subject of each --sizes")
    p.add_argument("--sizes", default="1000,10000,100000", help="sizes profile: records in the one subject")
    p.add_argument("--records", type=int, default=100_000, help="records loaded for the latency runs")
    p.add_argument("--subjects", type=int, default=1_000)
    p.add_argument("--queries", type=int, default=200, help="timed queries per measurement")
    p.add_argument("--write-records", type=int, default=10_000, help="records written through /memories/batch")
    p.add_argument("--e2e-records", type=int, default=3_000, help="records written with embed=now")
    p.add_argument("--writers", type=int, default=2, help="concurrent batch-writing clients")
    p.add_argument("--database", default=None, help="default engram_bench (engram_bench_knowledge for knowledge)")
    k = p.add_argument_group("knowledge profile")
    k.add_argument("--chunks", type=int, default=50_000)
    k.add_argument("--domains", type=int, default=20)
    k.add_argument("--chunks-per-document", type=int, default=10)
    k.add_argument("--limit", type=int, default=20, help="candidates per leg of the knowledge provider")
    k.add_argument("--memories", type=int, default=100, help="memory records of the mixed-retrieval principal")
    k.add_argument("--reuse", action="store_true", help="keep chunks loaded by a previous run of the same size")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    if args.database is None:
        args.database = {"knowledge": "engram_bench_knowledge", "sizes": "engram_bench_sizes"}.get(
            args.profile, "engram_bench")
    return args


def reset_database(name: str) -> None:
    import psycopg

    from config.embedded_db import ensure_server

    socket_dir = ensure_server(ROOT)
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def open_database(name: str, *, reuse: bool, console: Any) -> None:
    """Point Django at the benchmark's own database (fresh unless ``reuse``), set it up and migrate it."""
    os.environ["ENGRAM_DB_NAME"] = name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if reuse:
        from config.embedded_db import ensure_server

        ensure_server(ROOT, database=name)
    else:
        console.print(f"[bold]Resetting database {name}[/]")
        reset_database(name)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    args = parse()
    if args.profile == "knowledge":
        knowledge_profile(args)
    elif args.profile == "sizes":
        sizes_profile(args)
    else:
        memory_profile(args)


def memory_profile(args: argparse.Namespace) -> None:  # noqa: C901 - a linear script, step by step
    os.environ["ENGRAM_DB_NAME"] = args.database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    console = Console()
    console.print(f"[bold]Resetting database {args.database}[/]")
    reset_database(args.database)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)

    import numpy as np
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from memory.embedder import get_embedder
    from memory.identity.services import agent_key_create, principal_token_mint, tenant_create
    from memory.models import MemoryClass, MemoryRecord, Subject
    from memory.normalise import fact_hash
    from memory.policy.classes import pick_class
    from memory.records.indexing import record_search_vector
    from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve
    from memory.retrieval.selectors import fact_get
    from memory.scope import Scope

    rng = random.Random(args.seed)
    progress_columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    tenant = tenant_create(slug="bench")
    noise = tenant_create(slug="bench-other")  # a second tenant with the same texts: the naive scan must skip it
    classes = {c.namespace_prefix: c for c in MemoryClass.objects.filter(tenant=tenant)}
    noise_classes = {c.namespace_prefix: c for c in MemoryClass.objects.filter(tenant=noise)}

    # --- 1. generate --------------------------------------------------------------------------------
    per_subject = max(1, args.records // args.subjects)
    subjects = Subject.objects.bulk_create(
        [Subject(tenant=tenant if i % 10 else noise, external_id=f"usr_{i:05d}") for i in range(args.subjects)])
    rows: list[dict[str, Any]] = []
    for subject in subjects:
        for n in range(per_subject):
            if n < len(TOPICS):
                field, ns, kind, value_fn, text_fn, query = TOPICS[n]
                value = value_fn(rng)
                text = text_fn(value)
                query = query or value
            else:
                field, ns, kind, value, text, query = trip(rng, n)
            rows.append({"subject": subject, "field": field, "namespace": ns, "kind": kind, "value": value,
                         "text": text, "query": query})
    texts = sorted({r["text"] for r in rows})
    console.print(f"{len(rows):,} records across {len(subjects):,} subjects; {len(texts):,} distinct texts")

    # --- 2. embed in bulk, COPY ----------------------------------------------------------------------
    embedder = get_embedder()
    vectors: dict[str, Any] = {}
    with Progress(*progress_columns, console=console) as progress:
        task = progress.add_task("embedding", total=len(texts))
        started = time.perf_counter()
        for start in range(0, len(texts), 1024):
            chunk = texts[start:start + 1024]
            for text, vec in zip(chunk, embedder.embed(chunk, batch_size=64), strict=True):
                vectors[text] = np.asarray(vec, dtype=np.float32)
            progress.advance(task, len(chunk))
    bulk_embed_rate = len(texts) / (time.perf_counter() - started)

    from django.utils import timezone

    from memory.ids import new_memory_id

    now = timezone.now()
    columns = ["id", "tenant_id", "subject_id", "namespace", "kind", "memory_type", "field", "fact", "text",
               "source_type", "confidence", "sensitivity", "memory_class_id", "status", "status_reason",
               "valid_from", "created_at", "content_hash", "embedding"]
    types = ["varchar", "int8", "int8", "varchar", "varchar", "varchar", "varchar", "jsonb", "text", "varchar",
             "varchar", "varchar", "int8", "varchar", "varchar", "timestamptz", "timestamptz", "varchar", "vector"]
    connection.ensure_connection()
    raw = connection.connection
    register_vector(raw)
    started = time.perf_counter()
    with Progress(*progress_columns, console=console) as progress:
        task = progress.add_task("COPY", total=len(rows))
        with raw.cursor() as cursor, cursor.copy(
                f"COPY memory_memoryrecord ({', '.join(columns)}) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for i, r in enumerate(rows):
                subject = r["subject"]
                own = classes if subject.tenant_id == tenant.pk else noise_classes
                memory_class = pick_class(own, r["namespace"])
                assert memory_class is not None
                r["id"] = new_memory_id()
                copy.write_row([r["id"], subject.tenant_id, subject.pk, r["namespace"], r["kind"],
                                "episodic" if r["kind"] == "episode" else "semantic", r["field"],
                                Jsonb({"field": r["field"], "value": r["value"]}), r["text"],
                                "explicit_user_statement", "confirmed", memory_class.sensitivity, memory_class.pk,
                                "active", "", now, now, fact_hash(r["field"], r["value"]), vectors[r["text"]]])
                if i % 5000 == 0:
                    progress.update(task, completed=i)
            progress.update(task, completed=len(rows))
    raw.commit() if not connection.get_autocommit() else None
    copy_seconds = time.perf_counter() - started
    console.print("full-text vectors ...")
    started = time.perf_counter()
    MemoryRecord.objects.filter(search_vector__isnull=True).update(search_vector=record_search_vector())
    fts_seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memoryrecord")
    console.print(f"COPY {len(rows) / copy_seconds:,.0f} rows/s; text vectors {fts_seconds:.1f} s")

    # --- 3. the HTTP server --------------------------------------------------------------------------
    _, raw_key = agent_key_create(tenant=tenant, name="bench", permissions=["read", "write"])
    server = start_server(args)
    try:
        results = run_measurements(args, console, tenant, subjects, rows, raw_key, bulk_embed_rate,
                                   memory_retrieve, RetrieveRequest, fact_get, Scope, principal_token_mint,
                                   connection, embedder)
    finally:
        server.terminate()
        server.wait(timeout=30)
    results["load"] = {"records": len(rows), "subjects": len(subjects), "distinct_texts": len(texts),
                       "copy_rows_per_s": round(len(rows) / copy_seconds), "text_vectors_s": round(fts_seconds, 2),
                       "bulk_embed_sentences_per_s": round(bulk_embed_rate, 1)}
    report(console, Table, results, args)


def http_call(port: int, method: str, path: str, headers: dict[str, str], body: Any = None) -> tuple[int, Any, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {**headers, "Content-Type": "application/json"} if data else headers
    started = time.perf_counter()
    conn.request(method, path, body=data, headers=hdrs)
    response = conn.getresponse()
    payload = response.read()
    elapsed = (time.perf_counter() - started) * 1000.0
    conn.close()
    return response.status, json.loads(payload) if payload else None, elapsed


def run_measurements(args: Any, console: Any, tenant: Any, subjects: list[Any], rows: list[dict[str, Any]],
                     raw_key: str, bulk_embed_rate: float, memory_retrieve: Any, RetrieveRequest: Any,
                     fact_get: Any, Scope: Any, principal_token_mint: Any, connection: Any,
                     embedder: Any) -> dict[str, Any]:
    from django.utils import timezone

    from memory.retrieval import candidates as legs

    for _ in range(100):
        try:
            if http_call(args.port, "GET", "/api/v1/health", {})[0] == 200:
                break
        except OSError:
            time.sleep(0.3)
    rng = random.Random(args.seed + 1)
    auth = {"Authorization": f"Bearer {raw_key}"}

    def headers_for(external_id: str) -> dict[str, str]:
        token, _, _ = principal_token_mint(tenant=tenant, subject_external_id=external_id, ttl=3600)
        return {**auth, "X-Engram-Principal": token}

    # --- 4. bulk writes --------------------------------------------------------------------------------
    def batch_items(prefix: str, count: int) -> list[tuple[str, list[dict[str, Any]]]]:
        out = []
        for b in range(0, count, 500):
            external_id = f"{prefix}_{b // 500:03d}"
            items = []
            for n in range(b, min(count, b + 500)):
                field, ns, kind, value_fn, text_fn, _ = TOPICS[n % len(TOPICS)]
                value = f"{value_fn(rng)} #{n}"
                items.append({"namespace": ns.split("/"), "kind": kind, "fact": {"field": f"{field}_{n}",
                              "value": value}, "text": f"{text_fn(value)} (note {n})",
                              "source": {"type": "explicit_user_statement", "event_id": f"evt_{prefix}_{n}"}})
            out.append((external_id, items))
        return out

    from concurrent.futures import ThreadPoolExecutor

    def warm_workers(embed: str) -> None:
        # Concurrent calls so that every gunicorn worker has imported torch and loaded the model.
        jobs = [(headers_for(f"warm_{embed}_{n}"), batch_items(f"warm_{embed}_{n}", 16)[0][1]) for n in range(6)]
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(lambda j: http_call(args.port, "POST", "/api/v1/memories/batch", j[0],
                                              {"items": j[1], "embed": embed}), jobs))

    batches = batch_items("writer", args.write_records)
    prepared = [(headers_for(eid), items) for eid, items in batches]
    warm_workers("now")

    def post_batch(job: tuple[dict[str, str], list[dict[str, Any]]]) -> int:
        status, body, _ = http_call(args.port, "POST", "/api/v1/memories/batch", job[0], {"items": job[1]})
        assert status == 200, body
        return int(body["created"] + body["existing"])

    # Two clients, one per gunicorn worker (one per core): each call is one transaction of 500 items.
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.writers) as pool:
        written = sum(pool.map(post_batch, prepared))
    write_seconds = time.perf_counter() - started
    searchable = 0
    from memory.models import MemoryRecord

    searchable = MemoryRecord.objects.filter(subject__external_id__startswith="writer_",
                                             search_vector__isnull=False).count()
    e2e = batch_items("e2e", args.e2e_records)
    e2e_prepared = [(headers_for(eid), items) for eid, items in e2e]
    # The embedder's own batched throughput on the same texts, in this run (the floor), measured batch by
    # batch, interleaved with the end-to-end calls, so that load from other processes hits both alike.
    e2e_texts = [i["text"] for _, items in e2e for i in items]
    embedder.embed(e2e_texts[:64])
    warm_workers("now")
    embed_seconds = e2e_seconds = 0.0
    for headers, items in e2e_prepared:
        started = time.perf_counter()
        embedder.embed([i["text"] for i in items], batch_size=64)
        embed_seconds += time.perf_counter() - started
        started = time.perf_counter()
        status, body, _ = http_call(args.port, "POST", "/api/v1/memories/batch", headers,
                                    {"items": items, "embed": "now"})
        e2e_seconds += time.perf_counter() - started
        assert status == 200 and body["created"] == len(items), body
    embed_rate = len(e2e_texts) / embed_seconds
    embedded = MemoryRecord.objects.filter(subject__external_id__startswith="e2e_", embedding__isnull=False).count()
    writes = {
        "batch_records": written, "batch_seconds": round(write_seconds, 2), "writers": args.writers,
        "durable_searchable_per_s": round(written / write_seconds, 1), "lexically_searchable": searchable,
        "e2e_records": embedded, "e2e_seconds": round(e2e_seconds, 2),
        "e2e_per_s": round(len(e2e_texts) / e2e_seconds, 1), "embedder_per_s": round(embed_rate, 1),
        "e2e_vs_embedder": round(len(e2e_texts) / e2e_seconds / embed_rate, 3),
        "embeddings_pending_after_worker_mode": MemoryRecord.objects.filter(
            subject__external_id__startswith="writer_", embedding__isnull=True).count(),
    }
    console.print(writes)

    # --- 5. latency ----------------------------------------------------------------------------------
    by_subject: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r["subject"].tenant_id == tenant.pk:
            by_subject.setdefault(r["subject"].pk, []).append(r)
    sample_subjects = [s for s in subjects if s.tenant_id == tenant.pk]
    picks = []
    for _ in range(args.queries + 10):
        subject = rng.choice(sample_subjects)
        row = rng.choice(by_subject[subject.pk])
        picks.append((subject, {**row, "query": asked_once(row["query"])}))
    scope_cache: dict[int, Any] = {}
    headers_cache: dict[int, dict[str, str]] = {}
    key_id = None
    from memory.models import AgentKey

    key_id = AgentKey.objects.get(tenant=tenant, name="bench").pk

    def scope_for(subject: Any) -> Any:
        if subject.pk not in scope_cache:
            scope_cache[subject.pk] = Scope.for_agent(tenant_id=tenant.pk, subject_id=subject.pk,
                                                      subject_external_id=subject.external_id,
                                                      permissions=("read", "write"), namespaces=None,
                                                      agent_key_id=key_id)
            headers_cache[subject.pk] = headers_for(subject.external_id)
        return scope_cache[subject.pk]

    timings: dict[str, list[float]] = {k: [] for k in ("retrieve_api", "retrieve_selector", "retrieve_naive",
                                                       "facts_api", "facts_selector", "facts_naive")}
    recall: list[float] = []
    underfilled = 0
    found_target = 0
    from memory.models import RecordStatus
    from memory.search import vector_literal

    with connection.cursor() as cursor:
        for i, (subject, row) in enumerate(picks):
            warm = i < 10
            scope = scope_for(subject)
            headers = headers_cache[subject.pk]
            status, body, ms = http_call(args.port, "POST", "/api/v1/retrieve", headers, {"query": row["query"]})
            assert status == 200, body
            if not warm:
                timings["retrieve_api"].append(ms)
                found_target += any(p["memory_id"] == row["id"] for p in body["packets"])
            started = time.perf_counter()
            memory_retrieve(scope=scope, request=RetrieveRequest(query=row["query"]))
            if not warm:
                timings["retrieve_selector"].append((time.perf_counter() - started) * 1000.0)
            ns, field = row["namespace"], row["field"]
            status, body, ms = http_call(args.port, "GET", f"/api/v1/facts?namespace={ns}&field={field}", headers)
            assert status == 200 and body["memory_id"] == row["id"], body
            if not warm:
                timings["facts_api"].append(ms)
            started = time.perf_counter()
            fact_get(scope=scope, namespace=ns, field=field)
            if not warm:
                timings["facts_selector"].append((time.perf_counter() - started) * 1000.0)
            # Naive: exact distance to every row of the table, then the scope applied in Python.
            vector = embedder.embed_query(row["query"])
            literal = vector_literal(vector)
            started = time.perf_counter()
            cursor.execute("SELECT id, tenant_id, subject_id, status, valid_until, embedding <=> %s::vector AS d "
                           "FROM memory_memoryrecord WHERE embedding IS NOT NULL ORDER BY d", [literal])
            now = timezone.now()
            naive = []
            for _rid, tid, sid, st, until, d in cursor.fetchall():
                if tid == tenant.pk and sid == subject.pk and st == RecordStatus.ACTIVE and (
                        until is None or until > now):
                    naive.append(float(d))
                    if len(naive) == 10:
                        break
            if not warm:
                timings["retrieve_naive"].append((time.perf_counter() - started) * 1000.0)
            started = time.perf_counter()
            cursor.execute("SELECT id, tenant_id, subject_id, namespace, status FROM memory_memoryrecord "
                           "WHERE field = %s", [field])
            hits = [r for r in cursor.fetchall() if r[1] == tenant.pk and r[2] == subject.pk and r[3] == ns
                    and r[4] == RecordStatus.ACTIVE]
            assert hits
            if not warm:
                timings["facts_naive"].append((time.perf_counter() - started) * 1000.0)
            # Compared by distance, not id: a subject can hold two rows with the same text (equal distance).
            leg = legs.semantic_only(scope, legs.Filters(namespaces=None), vector, 10)
            ours = [float(r.distance) for r in leg]
            matched = 0
            for d in naive:  # within 1e-4: the naive query sends the vector as a 7-digit literal
                hit = next((o for o in ours if abs(o - d) < 1e-4), None)
                if hit is not None:
                    ours.remove(hit)
                    matched += 1
            recall.append(matched / max(1, len(naive)))
            underfilled += len(leg) < min(10, len(by_subject[subject.pk]))
    summary = {k: {"p50_ms": round(statistics.median(v), 2), "p95_ms": round(pct(v, 0.95), 2), "n": len(v)}
               for k, v in timings.items()}
    for kind in ("retrieve", "facts"):
        naive = summary[f"{kind}_naive"]["p50_ms"]
        for where in ("api", "selector"):
            summary[f"{kind}_{where}"]["naive_p50_over_this_p50"] = round(naive / summary[f"{kind}_{where}"]["p50_ms"],
                                                                          2)
    return {"latency": summary, "writes": writes,
            "quality": {"vector_leg_recall_at_10_vs_exact": round(statistics.mean(recall), 4),
                        "vector_leg_underfilled_queries": underfilled,
                        "target_record_in_packets": round(found_target / args.queries, 3)}}


def start_server(args: Any) -> subprocess.Popen[bytes]:
    """gunicorn with two web processes and no workers, started with malloc's huge pages and the model loaded
    before the first request, as `serve` starts them. Unlike `serve`'s, the processes embed batches with
    ENGRAM_EMBED_THREADS (default 2): `embed=now` is measured against the embedder's own two-thread rate."""
    from memory.workqueues import malloc_env

    env = {**os.environ, "ENGRAM_DB_NAME": args.database, "ENGRAM_LOG_LEVEL": "WARNING", **malloc_env()}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi:application", "-c",
                               "python:config.gunicorn", "--bind", f"127.0.0.1:{args.port}", "--workers", "2",
                               "--timeout", "300", "--log-level", "warning"], cwd=ROOT, env=env)
    wait_for_health(args.port)
    return server


def wait_for_health(port: int) -> None:
    for _ in range(200):
        try:
            if http_call(port, "GET", "/api/v1/health", {})[0] == 200:
                return
        except OSError:
            time.sleep(0.3)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def write_results(console: Any, name: str, results: dict[str, Any]) -> None:
    out = ROOT / "bench" / "results" / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results["command"] = "bench/retrieval.py " + " ".join(sys.argv[1:])
    results["load_average_at_end"] = load_average()
    out.write_text(json.dumps(results, indent=2))
    console.print(f"load average (1/5/15 min) at the end: {results['load_average_at_end']}")
    console.print(f"written {out.relative_to(ROOT)}")


def report(console: Any, Table: Any, results: dict[str, Any], args: Any) -> None:
    load = results["load"]
    table = Table(title=f"Retrieval at {load['records']:,} records / {load['subjects']:,} subjects "
                        f"({args.queries} queries)")
    for column in ("measurement", "p50 ms", "p95 ms", "naive p50 / this p50"):
        table.add_column(column, justify="right" if column != "measurement" else "left")
    for name, row in results["latency"].items():
        ratio = row.get("naive_p50_over_this_p50")
        table.add_row(name, f"{row['p50_ms']:.2f}", f"{row['p95_ms']:.2f}", f"{ratio:.1f}x" if ratio else "baseline")
    console.print(table)
    writes = Table(title="Bulk writes (POST /api/v1/memories/batch, 500 items per call)")
    writes.add_column("measurement")
    writes.add_column("value", justify="right")
    w = results["writes"]
    writes.add_row(f"durable + lexically searchable (embed=worker, {w['writers']} clients)",
                   f"{w['durable_searchable_per_s']:,.0f} records/s")
    writes.add_row("end to end with embeddings (embed=now)", f"{w['e2e_per_s']:,.0f} records/s")
    writes.add_row("embedder alone, batched, same texts", f"{w['embedder_per_s']:,.0f} sentences/s")
    writes.add_row("end to end / embedder", f"{w['e2e_vs_embedder']:.0%}")
    console.print(writes)
    console.print(results["quality"])
    write_results(console, "retrieval", results)


# --- sizes profile: cost against the size of one subject ---------------------------------------------------------

def sizes_profile(args: argparse.Namespace) -> None:  # noqa: C901 - a linear script, step by step
    """One subject per size (default 1k, 10k, 100k records of the memory profile's generator), loaded with COPY;
    then, per subject, ``--queries`` retrieves through HTTP (limit 10, budget 4000, one client) and at the selector,
    with the server's own stage timings from the retrieval logs."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=130)
    sizes = [int(x) for x in args.sizes.split(",")]
    open_database(args.database, reuse=args.reuse, console=console)
    import numpy as np
    from django.db import connection
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from memory.embedder import get_embedder
    from memory.identity.services import agent_key_create, principal_token_mint, tenant_create
    from memory.ids import new_memory_id
    from memory.models import MemoryClass, MemoryRecord, Subject, Tenant
    from memory.normalise import fact_hash
    from memory.policy.classes import pick_class
    from memory.records.indexing import record_search_vector
    from memory.retrieval.models import RetrievalLog
    from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve
    from memory.scope import Scope

    rng = random.Random(args.seed)
    tenant = Tenant.objects.filter(slug="bench-sizes").first() or tenant_create(slug="bench-sizes")
    classes = {c.namespace_prefix: c for c in MemoryClass.objects.filter(tenant=tenant)}
    embedder = get_embedder()
    plan: dict[int, list[dict[str, Any]]] = {}
    for size in sizes:
        subject = Subject.objects.filter(tenant=tenant, external_id=f"usr_{size}").first()
        if subject is not None and MemoryRecord.objects.filter(subject=subject).count() == size:
            console.print(f"reusing the subject of {size:,} records")
            rows = [{"query": q} for q in MemoryRecord.objects.filter(subject=subject).order_by("?")
                    .values_list("text", flat=True)[:args.queries + 10]]
            plan[size] = rows
            continue
        subject = subject or Subject.objects.create(tenant=tenant, external_id=f"usr_{size}")
        rows = []
        for n in range(size):
            if n < len(TOPICS):
                field, ns, kind, value_fn, text_fn, query = TOPICS[n]
                value = value_fn(rng)
                text = text_fn(value)
                query = query or value
            else:
                field, ns, kind, value, text, query = trip(rng, n)
            rows.append({"field": field, "namespace": ns, "kind": kind, "value": value, "text": text, "query": query})
        texts = sorted({r["text"] for r in rows})
        console.print(f"{size:,} records, {len(texts):,} distinct texts: embedding")
        vectors = dict(zip(texts, np.asarray(embedder.embed(texts), dtype=np.float32), strict=True))
        connection.ensure_connection()
        raw = connection.connection
        register_vector(raw)
        columns = ["id", "tenant_id", "subject_id", "namespace", "kind", "memory_type", "field", "fact", "text",
                   "source_type", "confidence", "sensitivity", "memory_class_id", "status", "status_reason",
                   "valid_from", "created_at", "content_hash", "embedding"]
        types = ["varchar", "int8", "int8", "varchar", "varchar", "varchar", "varchar", "jsonb", "text", "varchar",
                 "varchar", "varchar", "int8", "varchar", "varchar", "timestamptz", "timestamptz", "varchar", "vector"]
        from django.utils import timezone

        now = timezone.now()
        with raw.cursor() as cursor, cursor.copy(
                f"COPY memory_memoryrecord ({', '.join(columns)}) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for r in rows:
                memory_class = pick_class(classes, r["namespace"])
                assert memory_class is not None
                copy.write_row([new_memory_id(), tenant.pk, subject.pk, r["namespace"], r["kind"],
                                "episodic" if r["kind"] == "episode" else "semantic", f"{r['field']}_{rng.random()}",
                                Jsonb({"field": r["field"], "value": r["value"]}), r["text"],
                                "explicit_user_statement", "confirmed", memory_class.sensitivity, memory_class.pk,
                                "active", "", now, now, fact_hash(r["field"], r["value"]), vectors[r["text"]]])
        if not connection.get_autocommit():
            raw.commit()
        MemoryRecord.objects.filter(subject=subject, search_vector__isnull=True).update(
            search_vector=record_search_vector())
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_memoryrecord")
        plan[size] = rows
    # Subjects past the threshold get their own indexes and term statistics (what the worker does after writes).
    from memory.retrieval.subject_index import maintain, threshold

    built: dict[int, float] = {}
    for size in sizes:
        subject = Subject.objects.get(tenant=tenant, external_id=f"usr_{size}")
        if size >= threshold():
            started = time.perf_counter()
            outcome = maintain(subject.pk)
            built[size] = round(time.perf_counter() - started, 1)
            console.print(f"subject of {size:,} records: indexes {outcome} in {built[size]} s")
    key, raw_key = agent_key_create(tenant=tenant, name=f"bench-{time.time():.0f}", permissions=["read", "write"])
    server = start_server(args)
    results: dict[str, Any] = {}
    try:
        for size in sizes:
            subject = Subject.objects.get(tenant=tenant, external_id=f"usr_{size}")
            token, _, _ = principal_token_mint(tenant=tenant, subject_external_id=subject.external_id, ttl=3600)
            headers = {"Authorization": f"Bearer {raw_key}", "X-Engram-Principal": token}
            scope = Scope.for_agent(tenant_id=tenant.pk, subject_id=subject.pk,
                                    subject_external_id=subject.external_id, permissions=("read",),
                                    namespaces=None, agent_key_id=key.pk)
            picks = [asked_once(rng.choice(plan[size])["query"]) for _ in range(args.queries + 10)]
            api, selector, logs, short = [], [], [], 0
            for i, query in enumerate(picks):
                status, body, ms = http_call(args.port, "POST", "/api/v1/retrieve", headers,
                                             {"query": query, "limit": 10, "budget_tokens": 4000})
                assert status == 200, body
                started = time.perf_counter()
                memory_retrieve(scope=scope, request=RetrieveRequest(query=query, limit=10, budget_tokens=4000))
                if i >= 10:  # the first ten warm both processes
                    api.append(ms)
                    selector.append((time.perf_counter() - started) * 1000.0)
                    logs.append(body["retrieval_id"])
                    short += len(body["packets"]) < min(10, size) and not body["dropped"].get("below_threshold")
            # Recall of the memory statement's top 10 against the exact scan of every scoped row (the same queries).
            from memory.retrieval import candidates as legs
            from memory.retrieval.ranking import MIN_SIMILARITY

            recall, tied_recall, indexed = [], [], 0
            for query in picks[10:]:
                vector = embedder.embed_query(query)
                kwargs = {"pool": 40, "limit": 10, "max_distance": 1.0 - MIN_SIMILARITY}
                got = legs.search(scope, legs.Filters(namespaces=None), query, vector, **kwargs)
                want = legs.search(scope, legs.Filters(namespaces=None), query, vector, exact=True, **kwargs)
                want_ids = [c.row["id"] for c in want.candidates[:10]]
                recall.append(len(set(want_ids) & {c.row["id"] for c in got.candidates[:10]}) / max(1, len(want_ids)))
                # Records of equal relevance (the generator repeats texts) are tied in the exact ranking, which
                # breaks ties by id: a top 10 with the same scores is as exact. Counted as the share of the exact
                # top 10's relevance values that the answer also has.
                want_scores = Counter(round(c.relevance, 9) for c in want.candidates[:10])
                got_scores = Counter(round(c.relevance, 9) for c in got.candidates[:10])
                tied_recall.append(sum((want_scores & got_scores).values()) / max(1, sum(want_scores.values())))
                indexed += got.indexed
            stages = [t for t in RetrievalLog.objects.filter(pk__in=logs).values_list("timings_ms", flat=True)]
            results[str(size)] = {
                "http_p50_ms": round(statistics.median(api), 2), "http_p95_ms": round(pct(api, 0.95), 2),
                "selector_p50_ms": round(statistics.median(selector), 2),
                "memory_stage_p50_ms": round(statistics.median([t["memory"] for t in stages]), 2),
                "embed_p50_ms": round(statistics.median([t["embed"] for t in stages]), 2),
                "underfilled": short, "queries": len(api), "recall_at_10_vs_exact": round(statistics.mean(recall), 4),
                "recall_at_10_vs_exact_ties_equal": round(statistics.mean(tied_recall), 4),
                "answered_by_subject_indexes": indexed, "index_build_s": built.get(size)}
    finally:
        server.terminate()
        server.wait(timeout=30)
    table = Table(title=f"Retrieve against one subject, by its size ({args.queries} distinct queries each, "
                        "limit 10, budget 4000, one client)")
    for column in ("records in the subject", "HTTP p50 ms", "HTTP p95 ms", "selector p50 ms",
                   "memory statement p50 ms", "query embedding p50 ms", "under-filled", "recall@10 vs exact",
                   "ties equal", "indexed"):
        table.add_column(column, justify="right")
    for size, row in results.items():
        table.add_row(f"{int(size):,}", f"{row['http_p50_ms']:.1f}", f"{row['http_p95_ms']:.1f}",
                      f"{row['selector_p50_ms']:.1f}", f"{row['memory_stage_p50_ms']:.1f}",
                      f"{row['embed_p50_ms']:.2f}", str(row["underfilled"]), f"{row['recall_at_10_vs_exact']:.3f}",
                      f"{row['recall_at_10_vs_exact_ties_equal']:.3f}",
                      f"{row['answered_by_subject_indexes']}/{row['queries']}")
    console.print(table)
    write_results(console, "sizes", {"args": vars(args), "sizes": results})


# --- knowledge profile ----------------------------------------------------------------------------------
K_TOPICS = ["billing", "refunds", "shipping", "vpn", "onboarding", "payroll", "security", "incidents", "deploys",
            "databases", "backups", "pricing", "contracts", "hiring", "travel", "expenses", "laptops", "printers",
            "wifi", "email", "calendar", "support", "escalation", "sla", "api", "webhooks", "mobile", "search",
            "analytics", "invoices", "taxes", "compliance", "privacy", "retention", "audits", "vendors", "legal",
            "marketing", "design", "accessibility"]
K_VERBS = ["requires", "explains", "covers", "describes", "limits", "allows", "blocks", "schedules", "reviews",
           "tracks", "rotates", "archives", "approves", "escalates", "measures"]
K_OBJECTS = ["approval from a manager", "a ticket in the queue", "the quarterly review", "a signed form",
             "the on-call engineer", "two business days", "the regional office", "a security check",
             "the finance team", "an automated job", "the customer portal", "a written summary", "the audit log",
             "the staging environment", "a backup copy"]
READERS = (("reads 1 domain", "usr_reads_1"), ("reads 5 domains", "usr_reads_5"),
           ("reads all domains", "usr_reads_all"))


def knowledge_load(args: argparse.Namespace, rng: random.Random, console: Any) -> dict[str, Any]:
    """Chunks are three generated sentences of one topic; a chunk's vector is the normalised mean of its
    sentences' real embeddings (clustered like real documents; only the 1,000-sentence pool is embedded).
    Documents go in with bulk_create, chunks with binary COPY, then one UPDATE fills the text vectors."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone
    from pgvector.psycopg import register_vector

    from memory.embedder import get_embedder
    from memory.identity.services import subject_get_or_create, tenant_create
    from memory.knowledge.models import AccessDomain, Chunk, Document
    from memory.knowledge.services import access_domain_create
    from memory.models import Tenant

    tenant = Tenant.objects.filter(slug="bench-knowledge").first()
    if args.reuse and tenant and Chunk.objects.filter(access_domain__tenant=tenant).count() == args.chunks \
            and AccessDomain.objects.filter(tenant=tenant).count() == args.domains:
        console.print(f"reusing {args.chunks:,} chunks in {args.domains} domains")
        return {"tenant": tenant, "reused": True}
    if tenant is None:
        tenant = tenant_create(slug="bench-knowledge")
    started = time.perf_counter()
    for _, external_id in READERS:
        subject_get_or_create(tenant=tenant, external_id=external_id)
    domains = []
    for d in range(args.domains):
        readers = ["usr_reads_all"] + (["usr_reads_5"] if d < 5 else []) + (["usr_reads_1"] if d == 0 else [])
        domains.append(access_domain_create(tenant=tenant, name=f"domain-{d:02d}", subject_external_ids=readers))
    pool = [(t, f"The {topic} policy {rng.choice(K_VERBS)} {rng.choice(K_OBJECTS)} for {rng.choice(K_TOPICS)} "
                f"cases number {rng.randint(1, 999)}.") for t, topic in enumerate(K_TOPICS) for _ in range(25)]
    t0 = time.perf_counter()
    vectors = np.array(get_embedder().embed([text for _, text in pool]), dtype=np.float32)
    embed_seconds = time.perf_counter() - t0
    by_topic: dict[int, list[int]] = {}
    for i, (t, _) in enumerate(pool):
        by_topic.setdefault(t, []).append(i)
    now = timezone.now()
    docs = Document.objects.bulk_create([
        Document(tenant=tenant, access_domain=domains[i % args.domains], external_id=f"doc-{i}",
                 title=f"{K_TOPICS[i % len(K_TOPICS)].title()} handbook part {i}", content_hash=f"{i:064d}",
                 ingested_at=now, char_count=0)
        for i in range(args.chunks // args.chunks_per_document)], batch_size=2000)
    t0 = time.perf_counter()
    connection.ensure_connection()
    raw = connection.connection
    register_vector(raw)
    written = 0
    with raw.cursor() as cur, cur.copy(
            "COPY knowledge_chunk (tenant_id, document_id, access_domain_id, ordinal, text, char_start, char_end, "
            "token_count, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "int8", "int4", "text", "int4", "int4", "int4", "vector"])
        for i, doc in enumerate(docs):
            for ordinal in range(args.chunks_per_document):
                picks = rng.sample(by_topic[i % len(K_TOPICS)], 3)
                text = " ".join(pool[p][1] for p in picks)
                vec = vectors[picks].mean(axis=0)
                copy.write_row([doc.tenant_id, doc.pk, doc.access_domain_id, ordinal, text, 0, len(text), 40,
                                vec / np.linalg.norm(vec)])
                written += 1
    copy_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE knowledge_chunk c SET search_vector = setweight(to_tsvector('english', d.title), 'B') "
                       "|| setweight(to_tsvector('english', c.text), 'A') FROM knowledge_document d "
                       "WHERE d.id = c.document_id")
        cursor.execute("ANALYZE knowledge_chunk")
        cursor.execute("ANALYZE knowledge_document")
    return {"tenant": tenant, "reused": False, "chunks": written, "load_s": round(time.perf_counter() - started, 1),
            "pool_embed_s": round(embed_seconds, 1), "copy_rows_per_s": round(written / copy_seconds),
            "text_vectors_s": round(time.perf_counter() - t0, 1)}


def knowledge_queries(n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        topic = rng.choice(K_TOPICS)
        out.append(rng.choice([f"{topic} {rng.choice(K_VERBS)} {rng.choice(K_OBJECTS)}",
                               f"what does the {topic} policy say about {rng.choice(K_OBJECTS)}",
                               f"{topic} {rng.choice(K_TOPICS)} cases"]))
    return [asked_once(q) for q in out]


def knowledge_profile(args: argparse.Namespace) -> None:  # noqa: C901 - a linear script, step by step
    os.environ["ENGRAM_DB_NAME"] = args.database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from rich.console import Console
    from rich.table import Table

    console = Console(width=130)
    if not args.reuse:
        console.print(f"[bold]Resetting database {args.database}[/]")
        reset_database(args.database)
    else:
        from config.embedded_db import ensure_server

        ensure_server(ROOT, database=args.database)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)
    from memory.embedder import get_embedder
    from memory.identity.services import agent_key_create, principal_token_mint
    from memory.knowledge.models import AccessDomain, Chunk
    from memory.knowledge.retrieval_provider import knowledge_search
    from memory.models import AgentKey, Subject
    from memory.records.services import RecordInput, memory_write_batch
    from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve
    from memory.retrieval.sources import RetrievalQuery
    from memory.scope import Scope
    from memory.search import vector_literal

    rng = random.Random(args.seed)
    loaded = knowledge_load(args, rng, console)
    tenant = loaded.pop("tenant")
    embedder = get_embedder()
    texts = knowledge_queries(args.queries + 10, rng)
    vectors = embedder.embed(texts)
    key = AgentKey.objects.filter(tenant=tenant, name="bench").first()
    if key is None:
        key, raw_key = agent_key_create(tenant=tenant, name="bench", permissions=["read", "write"])
    else:  # a reused load: a fresh key (only its hash is stored)
        key, raw_key = agent_key_create(tenant=tenant, name=f"bench-{time.time():.0f}", permissions=["read", "write"])

    def scope_of(external_id: str) -> Any:
        subject = Subject.objects.get(tenant=tenant, external_id=external_id)
        return Scope.for_agent(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=external_id,
                               permissions=("read", "write"), namespaces=None, agent_key_id=key.pk)

    # The mixed-retrieval principal's own memories (idempotent per event id, so a reused load replays them).
    mixed = scope_of("usr_reads_5")
    mrng = random.Random(3)
    items = []
    for i in range(args.memories):
        topic = mrng.choice(K_TOPICS)
        items.append(RecordInput(namespace="user/travel_preferences", kind="preference", field=f"{topic}_note_{i}",
                                 value=f"{topic} {mrng.choice(K_OBJECTS)}",
                                 text=f"Prefers the {topic} policy to cover {mrng.choice(K_OBJECTS)}",
                                 event_id=f"evt_bench_{i}"))
    for start in range(0, len(items), 500):
        memory_write_batch(scope=mixed, items=items[start:start + 500], embed_now=True)

    timings: dict[str, list[float]] = {}
    provider_rows: dict[str, dict[str, Any]] = {}
    for label, external_id in READERS:
        scope = scope_of(external_id)
        readable_ids = set(AccessDomain.objects.filter(readers__external_id=external_id, tenant=tenant)
                           .values_list("pk", flat=True))
        readable = Chunk.objects.filter(access_domain_id__in=readable_ids).count()
        times, underfilled, leaked = [], 0, 0
        names = set(AccessDomain.objects.filter(pk__in=readable_ids).values_list("name", flat=True))
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            t0 = time.perf_counter()
            found = knowledge_search(scope, RetrievalQuery(text=text, vector=vector, limit=args.limit))
            if i >= 10:  # the first ten warm caches
                times.append((time.perf_counter() - t0) * 1000)
            underfilled += sum(1 for f in found if f.semantic_rank) < min(args.limit, readable)
            leaked += sum(1 for f in found if f.packet["access_domain"] not in names)
        timings[f"provider, {label}"] = times
        provider_rows[label] = {"readable_chunks": readable, "semantic_underfilled": underfilled, "leaked": leaked}

    # Naive baseline for the 5-domain principal: exact distance to every chunk, domains filtered afterwards.
    five = set(AccessDomain.objects.filter(readers__external_id="usr_reads_5", tenant=tenant)
               .values_list("pk", flat=True))
    naive: list[float] = []
    with connection.cursor() as cursor:
        for i, vector in enumerate(vectors):
            literal = vector_literal(vector)
            t0 = time.perf_counter()
            cursor.execute("SELECT id, access_domain_id, embedding <=> %s::vector AS d FROM knowledge_chunk "
                           "WHERE embedding IS NOT NULL ORDER BY d", [literal])
            kept = []
            for _cid, domain_id, d in cursor.fetchall():
                if domain_id in five:
                    kept.append(d)
                    if len(kept) == args.limit:
                        break
            if i >= 10:
                naive.append((time.perf_counter() - t0) * 1000)
    timings["naive full scan + post-filter (5 domains)"] = naive

    request = {"budget_tokens": 400, "limit": 10, "include": ["memory", "knowledge"]}
    selector_times, share = [], []
    for i, text in enumerate(texts):
        t0 = time.perf_counter()
        result = memory_retrieve(scope=mixed, request=RetrieveRequest(query=text, include=("memory", "knowledge"),
                                                                     budget_tokens=400, limit=10))
        if i >= 10:
            selector_times.append((time.perf_counter() - t0) * 1000)
            if result.packets:
                share.append(sum(p.get("kind") == "knowledge" for p in result.packets) / len(result.packets))
    timings["mixed retrieve (memory+knowledge), selector"] = selector_times

    server = start_server(args)
    try:
        token, _, _ = principal_token_mint(tenant=tenant, subject_external_id="usr_reads_5", ttl=3600)
        headers = {"Authorization": f"Bearer {raw_key}", "X-Engram-Principal": token}
        api_times, statuses = [], set()
        for i, text in enumerate(texts):
            status, _body, ms = http_call(args.port, "POST", "/api/v1/retrieve", headers, {"query": text, **request})
            statuses.add(status)
            if i >= 10:
                api_times.append(ms)
        timings["mixed retrieve (memory+knowledge), HTTP API"] = api_times
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert statuses == {200}, statuses

    summary = {k: {"p50_ms": round(statistics.median(v), 2), "p95_ms": round(pct(v, 0.95), 2), "n": len(v)}
               for k, v in timings.items()}
    naive_p50 = summary["naive full scan + post-filter (5 domains)"]["p50_ms"]
    summary["provider, reads 5 domains"]["naive_p50_over_this_p50"] = round(
        naive_p50 / summary["provider, reads 5 domains"]["p50_ms"], 2)
    table = Table(title=f"Knowledge: {args.chunks:,} chunks in {args.domains} domains, {args.queries} queries, "
                        f"limit {args.limit}/leg, {args.memories} memories for the mixed principal")
    for column in ("measurement", "readable chunks", "p50 ms", "p95 ms", "naive p50 / this p50",
                   "under-filled", "leaked"):
        table.add_column(column, justify="left" if column == "measurement" else "right")
    for name, row in summary.items():
        extra = provider_rows.get(name.removeprefix("provider, "), {})
        ratio = row.get("naive_p50_over_this_p50")
        table.add_row(name, f"{extra['readable_chunks']:,}" if extra else "", f"{row['p50_ms']:.1f}",
                      f"{row['p95_ms']:.1f}", f"{ratio:.1f}x" if ratio else "",
                      str(extra.get("semantic_underfilled", "")), str(extra.get("leaked", "")))
    console.print(table)
    quality = {"knowledge_share_of_mixed_packets": round(statistics.mean(share), 2) if share else None,
               "http_statuses": sorted(statuses)}
    console.print({"load": loaded, **quality})
    write_results(console, "knowledge", {"args": {k: v for k, v in vars(args).items()}, "load": loaded,
                                         "latency": summary, "provider": provider_rows, "quality": quality})


if __name__ == "__main__":
    main()
