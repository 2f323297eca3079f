"""What other tenants cost one tenant's retrieve.

    .venv/bin/python bench/tenants.py                   # 0, 10, 30, 100 and 300 other tenants
    .venv/bin/python bench/tenants.py --tenants 0,1000

Every tenant has its own memory classes (seven by default), all in one table, and every retrieve joins its records
to their classes. The memory statement runs as a prepared statement on its generic plan (memory/db/statements.py),
planned without the subject's size or the reader's role: it guesses that a subject holds an average subject's rows
and that one class passes the reader's predicate, and a plan that let the classes drive the join read the subject's
rows once per class of the whole database. This benchmark writes one conversation of 600 turns (with their vectors
and context windows) into a tenant, then adds other tenants step by step, each with one conversation of 100 turns (so
that, as on a real service, the average subject is smaller than this one), and measures, in process,
``memory_retrieve`` on that subject with each question's vector already embedded (so the figure is the statement,
the ranking and the log, not the model), each step as a ratio to the step with no other tenant, in the same run.
Each step opens a new database connection (a new generic plan) after ``ANALYZE`` of the classes and records tables,
as autovacuum would have run on a service that has had these tenants for a while.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import random
import statistics
import time

from cost import questions, turns
from harness import load_average, pct, use_database, write_results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tenants", default="0,10,30,100,300", help="other tenants, comma-separated, ascending")
    p.add_argument("--turns", type=int, default=600)
    p.add_argument("--queries", type=int, default=80)
    p.add_argument("--other-turns", type=int, default=100, help="turns in each other tenant's one conversation")
    p.add_argument("--database", default="engram_bench_tenants")
    args = p.parse_args()
    steps = [int(s) for s in args.tenants.split(",")]

    use_database(args.database)
    from django.db import connection

    from memory.embedder import get_embedder
    from memory.identity.services import subject_get_or_create, tenant_create
    from memory.models import MemoryClass
    from memory.records.services import RecordInput, memory_write_batch
    from memory.retrieval.context import refresh_context
    from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve
    from memory.scope import Scope

    logging.getLogger("django-q").setLevel(logging.WARNING)  # one "Enqueued" line per batch otherwise
    rng = random.Random(7)
    tenant = tenant_create(slug="bench")
    subject = subject_get_or_create(tenant=tenant, external_id="usr_600")
    writer = Scope.for_system(actor="bench", tenant_id=tenant.pk, subject_id=subject.pk,
                              subject_external_id="usr_600", permissions=("read", "write"))

    def conversation(count: int, prefix: str) -> list[RecordInput]:
        """cost.py's conversation (sessions of 10-40 turns, days apart), as the write gate's inputs."""
        return [RecordInput(namespace="user/conversation", kind=t["kind"], field=t["fact"]["field"],
                            value=t["text"], text=t["text"], event_id=t["source"]["event_id"], memory_type="episodic",
                            occurred_at=dt.datetime.fromisoformat(t["source"]["occurred_at"]))
                for t in turns(rng, count, prefix)]

    items = conversation(args.turns, "evt")
    ids = [r.written.record.pk for start in range(0, len(items), 500)
           for r in memory_write_batch(scope=writer, items=items[start:start + 500])]
    refresh_context(ids)  # embeds the turns, then derives their windows
    reader = Scope.for_system(actor="agent_key:bench", tenant_id=tenant.pk, subject_id=subject.pk,
                              subject_external_id="usr_600", permissions=("read",))  # an agent's whole grant
    embedder = get_embedder()

    started_at = load_average()
    steps_measured: dict[int, dict[str, float]] = {}
    made = 0
    print(f"cores {os.cpu_count()}, load average {started_at}")
    for step in steps:
        for n in range(made, step):
            other = tenant_create(slug=f"other_{n}")
            person = subject_get_or_create(tenant=other, external_id="usr")
            memory_write_batch(scope=Scope.for_system(actor="bench", tenant_id=other.pk, subject_id=person.pk,
                                                      subject_external_id="usr", permissions=("write",)),
                               items=conversation(args.other_turns, f"o{n}"))
        made = max(made, step)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_memoryclass, memory_memoryrecord")
        connection.close()  # a new connection prepares the statement again: a generic plan made with these tenants
        asked = questions(rng, args.queries + 10)
        for q in asked:
            embedder.embed_query(q)  # embedded beforehand: the figure is everything but the model
        times = []
        for n, q in enumerate(asked):
            started = time.perf_counter()
            memory_retrieve(scope=reader, request=RetrieveRequest(query=q, limit=10, budget_tokens=4000))
            if n >= 10:  # the first ones prepare the statement
                times.append((time.perf_counter() - started) * 1000.0)
        steps_measured[step] = {"classes": MemoryClass.objects.count(), "p50": statistics.median(times),
                                "p95": pct(times, 0.95)}
    base = steps_measured[steps[0]]
    print(f"{'other tenants':>14} {'classes':>8} {'p50 ms':>8} {'p95 ms':>8} {'p50 ratio':>10} {'p95 ratio':>10}")
    for step, r in steps_measured.items():
        print(f"{step:>14,} {r['classes']:>8,.0f} {r['p50']:>8.2f} {r['p95']:>8.2f} {r['p50'] / base['p50']:>10.2f} "
              f"{r['p95'] / base['p95']:>10.2f}")
    ended_at = load_average()
    print(f"load average at the end {ended_at}")
    results = {"cores": os.cpu_count(), "load_average_at_start": started_at, "load_average_at_end": ended_at,
               "turns": args.turns, "other_turns": args.other_turns, "steps": steps_measured}
    print(f"written {write_results('tenants', results)}")


if __name__ == "__main__":
    main()
