"""/me/ at scale: latency of a person's memory page with 10,000 memories, against the unpaginated page
measured in the same run.

    .venv/bin/python bench/me_page.py                       # 10,000 memories, 20,000 of other people
    .venv/bin/python bench/me_page.py --memories 2000 --others 5000 --requests 20

Steps: (1) drop and migrate the bench database (default ``engram_bench_me``; the app database is never
touched); (2) write the person's memories and other subjects' memories through the batch write service
(the gates of POST /memories/batch; embeddings are left to a worker that is not running, as they do not
affect this page); (3) request each page through the whole Django stack (middleware, session, view,
selectors, templates) with the test client, logged in as the person, and report p50/p95 per scenario,
the response size and the ratio to the baseline. The baseline is the page before paging: every memory
of the person rendered at once (the same view with the page size raised above the number of memories).
Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPICS = ["flights", "hotels", "meals", "meetings"]
NAMESPACES = ["user/travel_preferences", "episodes", "project"]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=10_000, help="memories of the person (default 10,000)")
    p.add_argument("--others", type=int, default=20_000, help="memories of 10 other subjects in the tenant")
    p.add_argument("--requests", type=int, default=30, help="timed requests per scenario (after 3 warm-ups)")
    p.add_argument("--database", default="engram_bench_me")
    return p.parse_args()


def reset_database(name: str) -> None:
    import psycopg

    from config.embedded_db import ensure_server

    socket_dir = ensure_server(ROOT)
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def items(n: int, tag: str) -> list[Any]:
    from memory.models import SourceType
    from memory.records.services import RecordInput

    out = []
    for i in range(n):
        booking = i % 5 == 0
        out.append(RecordInput(
            namespace=NAMESPACES[i % 3], kind="note", field=f"note_{tag}_{i}", value=f"value {i}",
            text=f"Memory number {i} about {TOPICS[i % 4]}", event_id=f"evt_{tag}_{i}",
            source_type=SourceType.SYSTEM_OF_RECORD if booking else SourceType.EXPLICIT_USER_STATEMENT,
            event_text="" if booking else f"I told you about {TOPICS[i % 4]} ({i})",
            source_ref={"system": "booking", "id": f"BK-{i}"} if booking else None))
    return out


def load(subject: Any, n: int, tag: str, progress: Any, task: Any) -> None:
    from memory.records.services import MAX_BATCH, memory_write_batch
    from memory.scope import Scope

    scope = Scope.for_system(actor="system:bench", tenant_id=subject.tenant_id, subject_id=subject.pk,
                             subject_external_id=subject.external_id, permissions=("read", "write"))
    all_items = items(n, tag)
    for start in range(0, n, MAX_BATCH):
        batch = all_items[start:start + MAX_BATCH]
        results = memory_write_batch(scope=scope, items=batch)
        assert all(r.error is None for r in results), [r.error for r in results if r.error][:3]
        progress.advance(task, len(batch))


def main() -> None:  # noqa: C901 - a linear script, step by step
    args = parse()
    os.environ["ENGRAM_DB_NAME"] = args.database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
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
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    import review.me
    from memory.identity.services import tenant_create, user_create
    from memory.models import Subject

    call_command("migrate", verbosity=0)
    tenant = tenant_create(slug="bench")
    person = user_create(tenant=tenant, username="alice", password="alice-pass-123", subject_external_id="usr_alice")
    mine = Subject.objects.get(tenant=tenant, external_id="usr_alice")
    others = [Subject.objects.create(tenant=tenant, external_id=f"usr_other_{n}") for n in range(10)]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console) as progress:
        task = progress.add_task("writing memories (batch write service)", total=args.memories + args.others)
        load(mine, args.memories, "me", progress, task)
        for n, other in enumerate(others):
            load(other, args.others // len(others), f"o{n}", progress, task)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    client = Client()
    client.force_login(person)
    page_size = review.me.PAGE_SIZE
    last = (args.memories + page_size - 1) // page_size
    scenarios: list[tuple[str, dict[str, str], dict[str, str]]] = [
        ("first page", {}, {}),
        (f"last page ({last})", {"page": str(last)}, {}),
        ("search, common word (1 in 4)", {"q": "hotels"}, {}),
        ("search, rare word (1 match)", {"q": "4242"}, {}),
        ("search as you type, htmx partial", {"q": "meet"}, {"HTTP_HX_REQUEST": "true"}),
        ("filters: namespace + source + status", {"namespace": "episodes", "source": "explicit_user_statement",
                                                  "status": "active"}, {}),
        ("search + filters, page 3", {"q": "flights", "namespace": "user", "page": "3"}, {}),
    ]

    def measure(params: dict[str, str], headers: dict[str, str], n: int) -> dict[str, Any]:
        times: list[float] = []
        size = 0
        for i in range(n + 3):
            started = time.perf_counter()
            response = client.get("/me/", params, **headers)
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, response.status_code
            size = len(response.content)
            if i >= 3:
                times.append(elapsed)
        with CaptureQueriesContext(connection) as queries:
            client.get("/me/", params, **headers)
        return {"p50_ms": round(pct(times, 0.5), 1), "p95_ms": round(pct(times, 0.95), 1),
                "mean_ms": round(statistics.fmean(times), 1), "bytes": size, "queries": len(queries)}

    console.print("[bold]Baseline: the unpaginated page (every memory on one page)[/]")
    review.me.PAGE_SIZE = args.memories + 1
    baseline = measure({}, {}, max(5, args.requests // 3))
    review.me.PAGE_SIZE = page_size
    results: dict[str, Any] = {"memories": args.memories, "others": args.others, "page_size": page_size,
                               "baseline_unpaginated": baseline, "scenarios": {}}
    for name, params, headers in scenarios:
        console.print(f"measuring: {name}")
        results["scenarios"][name] = measure(params, headers, args.requests)

    table = Table(title=f"/me/ with {args.memories:,} memories ({args.others:,} of others in the tenant), "
                        f"{args.requests} requests each")
    for column in ("scenario", "p50 ms", "p95 ms", "queries", "kB", "p50 vs unpaginated"):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    table.add_row("baseline: unpaginated page", f"{baseline['p50_ms']}", f"{baseline['p95_ms']}",
                  str(baseline["queries"]), f"{baseline['bytes'] / 1024:.0f}", "1.0×")
    for name, row in results["scenarios"].items():
        row["speedup_vs_unpaginated"] = round(baseline["p50_ms"] / row["p50_ms"], 1)
        table.add_row(name, f"{row['p50_ms']}", f"{row['p95_ms']}", str(row["queries"]), f"{row['bytes'] / 1024:.0f}",
                      f"{row['speedup_vs_unpaginated']}× faster")
    console.print(table)
    one, five, fifteen = os.getloadavg()
    results["load_average_at_end"] = f"{one:.2f} {five:.2f} {fifteen:.2f}"
    results["command"] = "bench/me_page.py " + " ".join(sys.argv[1:])
    out = ROOT / "bench" / "results" / f"me_page-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    console.print(f"load average (1/5/15 min) at the end: {results['load_average_at_end']}")
    console.print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
