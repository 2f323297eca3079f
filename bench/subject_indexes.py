"""What many large subjects' own indexes cost everyone else: writes and query planning on the shared tables.

    .venv/bin/python bench/subject_indexes.py                    # 0, 100, 250, 500, 1000 indexed subjects
    .venv/bin/python bench/subject_indexes.py --subjects 0,50,200

A large subject's own indexes (memory/retrieval/subject_index.py) are partial indexes on the shared records and
context-window tables, three per subject (``PARTIAL_INDEXES``). PostgreSQL tests every partial index's predicate
for every row written to the table, and proves or refutes it for every statement it plans on the table. This
benchmark builds the indexes of N subjects that hold no rows (only the count of indexes matters here) on its own
migrated database, then measures, each as a ratio to the same measure with no subject indexed, in the same run:

- a write: ``memory_write_batch`` of 500 facts into an unindexed subject, per record;
- planning: ``EXPLAIN`` of a record read by id, and of the subject's rows, as the ORM sends them (not prepared).

It is what ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS bounds (docs/retrieval.md "Large subjects").
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

from harness import load_average, use_database, write_results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subjects", default="0,100,250,500,1000", help="indexed subjects, comma-separated, ascending")
    p.add_argument("--database", default="engram_bench_subject_indexes")
    p.add_argument("--writes", type=int, default=4, help="500-record batches written per step")
    args = p.parse_args()
    steps = [int(s) for s in args.subjects.split(",")]

    use_database(args.database)
    from django.db import connection

    from memory.db.statistics import analyse_written_tables
    from memory.identity.services import subject_get_or_create, tenant_create
    from memory.records.services import RecordInput, memory_write_batch
    from memory.retrieval.subject_index import PARTIAL_INDEXES, index_name
    from memory.scope import Scope

    logging.getLogger("django-q").setLevel(logging.WARNING)  # one "Enqueued" line per batch otherwise
    tenant = tenant_create(slug="bench", name="bench")
    written = 0

    def writer(name: str) -> Scope:
        # A new subject for every step, so that each step writes into a subject of the same size.
        subject = subject_get_or_create(tenant=tenant, external_id=name)
        return Scope.for_system(actor="bench", tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=name,
                                permissions=("read", "write"))

    def write_batch(scope: Scope) -> float:
        nonlocal written
        items = [RecordInput(namespace="user/profile", kind="note", field=f"f{written + n}", value=str(n),
                             text=f"Bench fact number {written + n} about the garden", event_id=f"evt_{written + n}")
                 for n in range(500)]
        written += 500
        started = time.perf_counter()
        memory_write_batch(scope=scope, items=items)
        return (time.perf_counter() - started) * 1000 / 500

    def plan_ms(sql: str, params: list[object], runs: int = 200) -> float:
        times = []
        with connection.cursor() as cursor:
            for _ in range(runs):
                started = time.perf_counter()
                cursor.execute("EXPLAIN " + sql, params)
                cursor.fetchall()
                times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    write_batch(writer("usr_warm_up"))  # warm-up: the first write creates the namespace rows and loads the code
    analyse_written_tables()  # as the worker does after a write: the foreign-key checks' plans need statistics
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_memoryrecord LIMIT 1")
        record_id = cursor.fetchone()[0]

    def measure(indexed: int, label: str) -> dict[str, object]:
        scope = writer(f"usr_writer_{len(rows)}")
        write = statistics.median(write_batch(scope) for _ in range(args.writes))
        by_id = plan_ms("SELECT * FROM memory_memoryrecord WHERE id = %s", [record_id])
        by_subject = plan_ms("SELECT id FROM memory_memoryrecord WHERE subject_id = %s AND status = 'active'",
                             [scope.subject_id])
        return {"subjects": indexed, "label": label, "partial_indexes": 4 * indexed, "write_ms_per_record": write,
                "plan_by_id_ms": by_id, "plan_by_subject_ms": by_subject, "table_records": written}

    built, rows = 0, []
    for target in steps:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            for fake in range(built, target):
                subject_id = 1_000_000 + fake  # no such subject: the index is empty, its predicate still costs
                for partial in PARTIAL_INDEXES:
                    cursor.execute(f"CREATE INDEX {index_name(subject_id, partial)} ON {partial.table} "
                                   f"USING {partial.method} WHERE subject_id = {subject_id}")
        built = target
        build_s = time.perf_counter() - started
        rows.append(measure(target, f"{build_s:.1f} s to build"))
        print(f"{target} subjects indexed ({build_s:.1f} s to build); load average {load_average()}", flush=True)

    # The same measures again with every subject index dropped: the tables have grown meanwhile, so this row says
    # how much of a step's cost is the indexes and how much the larger tables.
    with connection.cursor() as cursor:
        for fake in range(built):
            for partial in PARTIAL_INDEXES:
                cursor.execute(f"DROP INDEX {index_name(1_000_000 + fake, partial)}")
    rows.append(measure(0, "after dropping them"))
    base = rows[0]
    print(f"\nHost: {os.cpu_count()} cores, load average {load_average()} at the end")
    print("| indexed subjects | records in the table | write, per record | planning a read by id "
          "| planning the subject's rows |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['subjects']:,} ({row['label']}) | {row['table_records']:,} "
              f"| {row['write_ms_per_record']:.3f} ms "
              f"({row['write_ms_per_record'] / base['write_ms_per_record']:.2f}×) "
              f"| {row['plan_by_id_ms']:.3f} ms ({row['plan_by_id_ms'] / base['plan_by_id_ms']:.1f}×) "
              f"| {row['plan_by_subject_ms']:.3f} ms ({row['plan_by_subject_ms'] / base['plan_by_subject_ms']:.1f}×) |")
    print(f"\nresults: {write_results('subject_indexes', {'rows': rows})}")


if __name__ == "__main__":
    main()
