"""Bulk import through HTTP as a client sees it, and deletion while an import is being embedded.

    .venv/bin/python bench/import_load.py                    # 10,000 records, 2 clients x 500 items a call
    .venv/bin/python bench/import_load.py --records 3000 --deletions 10

Set-up: a fresh database ``engram_bench_import`` and ``manage.py serve`` on it — what ``make run`` starts
(gunicorn, 2 processes x 4 threads, and one worker per queue) — nothing else.

1. The embedder's own rate: the model embedding the import's texts in this process, batch 64, one
   thread per core (what the bulk worker gets), with the server idle. The baseline of step 2.
2. A one-subject import through ``POST /api/v1/memories/batch`` (``--clients`` clients, 500 items a call,
   embeddings left to the worker): *durable* = records / time until the last call answered (each answer
   means committed); *end to end* = records / time until the last of them has its embedding. Compared
   with step 1: the share of the embedder's own rate the whole path delivers.
3. Deletion under load: a second import of the same size into another subject, and while its embeddings
   are still pending, ``DELETE /api/v1/memories/{id}`` of another user's records every ``--interval``
   seconds; each deletion is timed from the DELETE until ``GET /api/v1/deletions/{id}`` says ``completed``
   (the job verified every read surface) and the record answers 404. Deletions on an idle server first,
   for comparison.

Prints a table and writes JSON to bench/results/ (with the load average: figures taken while other work
shares the cores are noisy).
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from typing import Any

from harness import (
    Client,
    credentials,
    embedder_rates,
    headers,
    load_average,
    pct,
    start_serve,
    stop,
    tree_rss_mb,
    use_database,
    write_results,
)

CITIES = ["Lisbon", "Munich", "Paris", "Porto", "Berlin", "Madrid", "Vienna", "Oslo", "Prague", "Milan", "Lyon",
          "Seville", "Krakow", "Tallinn", "Ghent", "Bologna", "Bergen", "Split", "Graz", "Turin"]
THINGS = ["aisle seats", "window seats", "vegetarian meals", "quiet hotel rooms", "early flights",
          "late check-out", "train travel", "a standing desk", "paper invoices", "video calls",
          "morning meetings", "green tea", "dark mode", "short summaries", "metric units"]
VERBS = ["prefers", "asked for", "dislikes", "always books", "wants to avoid", "mentioned liking", "needs"]


def sentence(rng: random.Random, n: int) -> str:
    return (f"{rng.choice(VERBS).capitalize()} {rng.choice(THINGS)} when travelling to {rng.choice(CITIES)} "
            f"(note {n})")


def items(rng: random.Random, start: int, count: int, prefix: str) -> list[dict[str, Any]]:
    out = []
    for n in range(start, start + count):
        text = sentence(rng, n)
        out.append({"namespace": ["project", "notes"], "kind": "note",
                    "fact": {"field": f"note_{n}", "value": text}, "text": text,
                    "source": {"type": "explicit_user_statement", "event_id": f"{prefix}_{n}"}})
    return out


def pending(subject: str) -> int:
    from memory.models import MemoryRecord

    return MemoryRecord.objects.filter(subject__external_id=subject, embedding__isnull=True,
                                       memory_class__embed=True, status="active").count()


def import_records(port: int, creds: dict[str, Any], subject: str, records: list[dict[str, Any]], clients: int,
                   batch: int) -> dict[str, Any]:
    calls = [records[i:i + batch] for i in range(0, len(records), batch)]
    lock = threading.Lock()
    created: list[int] = []
    errors: list[str] = []
    latencies: list[float] = []

    def worker(mine: list[list[dict[str, Any]]]) -> None:
        client = Client(port)
        for chunk in mine:
            status, body, ms = client.call("POST", "/api/v1/memories/batch", headers(creds, subject), {"items": chunk})
            with lock:
                latencies.append(ms)
                if status != 200:
                    errors.append(f"{status} {str(body)[:200]}")
                else:
                    created.append(body["created"])
                    errors.extend(f"{r['code']}" for r in body["results"] if r["status"] == "error")

    threads = [threading.Thread(target=worker, args=(calls[i::clients],)) for i in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    durable_s = time.perf_counter() - started
    return {"started": started, "durable_s": durable_s, "created": sum(created), "errors": errors,
            "call_ms_p50": pct(latencies, 0.5), "call_ms_p95": pct(latencies, 0.95)}


def wait_embedded(subject: str, started: float, timeout: float = 1800.0) -> float:
    deadline = time.perf_counter() + timeout
    while pending(subject) and time.perf_counter() < deadline:
        time.sleep(0.2)
    if pending(subject):
        raise RuntimeError(f"embeddings still pending after {timeout}s")
    return time.perf_counter() - started


def delete_and_verify(client: Client, creds: dict[str, Any], subject: str, memory_id: str) -> dict[str, Any]:
    hdrs = headers(creds, subject)
    started = time.perf_counter()
    status, body, _ = client.call("DELETE", f"/api/v1/memories/{memory_id}", hdrs)
    if status != 202:
        raise RuntimeError(f"DELETE answered {status}: {body}")
    job = body["deletion_id"]
    while True:
        status, body, _ = client.call("GET", f"/api/v1/deletions/{job}", hdrs)
        if body.get("status") in ("completed", "failed"):
            break
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    # Verified by reading: the record answers 404, or stays only as a content-free "deleted" row.
    status, record, _ = client.call("GET", f"/api/v1/memories/{memory_id}", hdrs)
    blank = status == 404 or (record.get("status") == "deleted" and not record.get("text")
                              and not (record.get("fact") or {}).get("value"))
    return {"seconds": elapsed, "status": body["status"], "content_gone": blank}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=10_000)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--deletions", type=int, default=30, help="deletions issued while the second import embeds")
    p.add_argument("--interval", type=float, default=0.3, help="seconds between those deletions")
    p.add_argument("--port", type=int, default=8766)
    p.add_argument("--database", default="engram_bench_import")
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args()

    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"load average before: {load_average()}")
    use_database(args.database)
    creds = credentials("bench", ["usr_import", "usr_import_2", "usr_deleter"])
    rng = random.Random(args.seed)
    first = items(rng, 0, args.records, "imp1")
    second = items(rng, args.records, args.records, "imp2")
    server = start_serve(args.port)
    results: dict[str, Any] = {"records": args.records, "clients": args.clients, "batch": args.batch,
                               "load_average_at_start": load_average()}
    try:
        client = Client(args.port)
        # Records of the user who deletes, written one at a time (embedded by the interactive queue); this
        # also warms every worker up before anything is timed.
        victims = []
        for n in range(args.deletions + 10):
            text = sentence(rng, 900_000 + n)
            status, body, _ = client.call("POST", "/api/v1/memories", headers(creds, "usr_deleter"), {
                "namespace": ["project", "notes"], "kind": "note", "fact": {"field": f"keep_{n}", "value": text},
                "text": text, "source": {"type": "explicit_user_statement", "event_id": f"del_{n}"}})
            assert status == 201, body
            victims.append(body["memory_id"])
        warm = import_records(args.port, creds, "usr_import_2", items(rng, 10**7, 50, "warm"), 1, 50)
        wait_embedded("usr_import_2", warm["started"])
        wait_embedded("usr_deleter", time.perf_counter())
        idle = [delete_and_verify(client, creds, "usr_deleter", victims.pop()) for _ in range(10)]
        results["deletion_idle_s"] = {"p50": pct([d["seconds"] for d in idle], 0.5),
                                      "p95": pct([d["seconds"] for d in idle], 0.95)}

        console.print("measuring the embedder's own rate ...")
        results["embedder_rate"], results["embedder_runtime"] = max(embedder_rates([i["text"] for i in first[:2000]]))

        console.print(f"importing {args.records} records ...")
        rss_before = tree_rss_mb(server.pid)
        console.print(f"serve process tree: {rss_before:.0f} MiB resident")
        run = import_records(args.port, creds, "usr_import", first, args.clients, args.batch)
        e2e_s = wait_embedded("usr_import", run["started"])
        results["import"] = {"durable_rate": run["created"] / run["durable_s"], "durable_s": run["durable_s"],
                             "e2e_rate": run["created"] / e2e_s, "e2e_s": e2e_s, "created": run["created"],
                             "errors": len(run["errors"]), "call_ms_p50": run["call_ms_p50"],
                             "call_ms_p95": run["call_ms_p95"]}
        results["import"]["e2e_share_of_embedder"] = results["import"]["e2e_rate"] / results["embedder_rate"]

        console.print("deletions while a second import is being embedded ...")
        timings: list[dict[str, Any]] = []
        box: dict[str, Any] = {}
        importer = threading.Thread(target=lambda: box.update(
            run=import_records(args.port, creds, "usr_import_2", second, args.clients, args.batch)))
        importer.start()
        while pending("usr_import_2") < min(1000, args.records // 2):
            time.sleep(0.05)
        while len(timings) < args.deletions and victims:
            embedding_pending = pending("usr_import_2")
            if not embedding_pending:
                break
            result = delete_and_verify(client, creds, "usr_deleter", victims.pop())
            result["embeddings_pending_at_start"] = embedding_pending
            timings.append(result)
            time.sleep(args.interval)
        importer.join()
        wait_embedded("usr_import_2", box["run"]["started"])
        seconds = [t["seconds"] for t in timings]
        results["deletion_under_load_s"] = {
            "count": len(timings), "p50": pct(seconds, 0.5), "p95": pct(seconds, 0.95), "max": max(seconds),
            "all_completed": all(t["status"] == "completed" for t in timings),
            "all_content_gone": all(t["content_gone"] for t in timings),
            "min_embeddings_pending": min(t["embeddings_pending_at_start"] for t in timings)}
        results["serve_rss_mb"] = {"before_import": rss_before, "after": tree_rss_mb(server.pid)}
    finally:
        stop(server)

    table = Table(title=f"Import and deletion under load ({args.records} records, {args.clients} clients x "
                        f"{args.batch} items)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    imp = results["import"]
    dl = results["deletion_under_load_s"]
    table.add_row(f"embedder's own rate (this run, {results['embedder_runtime']})",
                  f"{results['embedder_rate']:.0f} records/s")
    table.add_row("import durable", f"{imp['durable_rate']:.0f} records/s ({imp['durable_s']:.1f} s)")
    table.add_row("import end to end (embedded)", f"{imp['e2e_rate']:.0f} records/s ({imp['e2e_s']:.1f} s)")
    table.add_row("end to end / embedder's own rate", f"{imp['e2e_share_of_embedder']:.0%}")
    table.add_row("batch call p50 / p95", f"{imp['call_ms_p50']:.0f} / {imp['call_ms_p95']:.0f} ms")
    table.add_row("deletion, idle queue p50 / p95",
                  f"{results['deletion_idle_s']['p50']:.2f} / {results['deletion_idle_s']['p95']:.2f} s")
    table.add_row(f"deletion during import embedding ({dl['count']}) p50 / p95 / max",
                  f"{dl['p50']:.2f} / {dl['p95']:.2f} / {dl['max']:.2f} s")
    table.add_row("every deletion completed, verified, content gone when read",
                  str(dl["all_completed"] and dl["all_content_gone"]))
    console.print(table)
    out = write_results("import_load", results)
    console.print(f"load average at the end: {results['load_average_at_end']}; written {out.name}")


if __name__ == "__main__":
    main()
