"""Deletion while the agent keeps working: single-record deletions on a subject that is being retrieved and written.

    .venv/bin/python bench/deletion.py                       # 3 retrieving clients, 1 writing, 40 deletions
    .venv/bin/python bench/deletion.py --deletions 20 --logs 10000

Set-up: a fresh database ``engram_bench_deletion`` and ``manage.py serve`` on it, as ``make run`` starts it
(gunicorn and a worker per queue), rate limits off. One subject gets ``--records`` records (batch writes).

Part 1, traffic: ``--retrievers`` clients retrieve on that subject in a loop and one client writes single
records to it, while a deleter DELETEs one of the seeded records every ``--every`` seconds. Prints, from the
jobs' own rows, the request -> completed time (p50/p95/max), jobs not completed, automatic retries, and the
worker time per step (DeletionStep.duration_ms: mean/p95/max), plus the clients' call counts and errors.

Part 2, history: two quiet subjects with the same records, one with ``--logs`` retrieval logs (bulk inserted, each
naming the subject's first records by id and a query of their words, as an assistant that retrieves on every turn
leaves them) and one with none; ``--history-deletions`` single-record deletions on each, one at a time. Prints
the purge (retrieval_logs step) and verification times of both and their ratio.

Writes JSON to bench/results/. Only talks to 127.0.0.1; bounded by counts and a timeout.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from collections import defaultdict
from typing import Any

from harness import Client, credentials, load_average, pct, start_serve, stop, use_database, write_results

WORDS = ["aisle", "window", "vegetarian", "Lisbon", "Munich", "early", "quiet", "train", "hotel", "invoice",
         "standing desk", "green tea", "metric", "Porto", "Oslo", "late check-out"]
TIMEOUT = 300.0


def item(rng: random.Random, tag: str, n: int) -> dict[str, Any]:
    # Unique words per record: verification rightly fails while another live record says the very same thing.
    words = f"{' '.join(rng.sample(WORDS, 3))} {tag}-{n}"
    return {"namespace": ["user", "bench"], "kind": "note", "fact": {"field": f"f_{tag}_{n}", "value": words},
            "text": f"Mentioned {words}", "source": {"type": "explicit_user_statement", "event_id": f"e_{tag}_{n}"}}


def seed(client: Client, hdrs: dict[str, str], rng: random.Random, tag: str, count: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 50):
        items = [item(rng, tag, n) for n in range(start, min(count, start + 50))]
        status, body, _ = client.call("POST", "/api/v1/memories/batch", hdrs, {"items": items})
        assert status in (200, 201, 207), (status, body)
        ids += [r["memory_id"] for r in body["results"] if r["status"] != "error"]
    return ids


def wait_jobs(job_ids: list[str], timeout: float) -> None:
    from memory.deletion.models import DeletionJob

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not DeletionJob.objects.filter(pk__in=job_ids, status__in=["pending", "running"],
                                          retry_at__isnull=True).exists():
            return
        time.sleep(0.2)


def job_figures(job_ids: list[str]) -> dict[str, Any]:
    from memory.deletion.models import DeletionJob, DeletionStep

    jobs = list(DeletionJob.objects.filter(pk__in=job_ids).values("pk", "status", "created_at", "completed_at",
                                                                   "retries", "reason"))
    took = [(j["completed_at"] - j["created_at"]).total_seconds() for j in jobs
            if j["status"] == "completed" and j["completed_at"] is not None]
    steps: dict[str, list[float]] = defaultdict(list)
    for name, ms in DeletionStep.objects.filter(job_id__in=job_ids, duration_ms__isnull=False).values_list(
            "name", "duration_ms"):
        steps[name].append(float(ms or 0.0))
    return {
        "deletions": len(jobs), "completed": len(took),
        "not_completed": {j["pk"]: f"{j['status']}: {j['reason']}" for j in jobs if j["status"] != "completed"},
        "retried": sum(1 for j in jobs if j["retries"]),
        "p50_s": pct(took, 0.5), "p95_s": pct(took, 0.95), "max_s": max(took) if took else float("nan"),
        "steps_ms": {name: {"mean": statistics.fmean(v), "p95": pct(v, 0.95), "max": max(v)}
                     for name, v in sorted(steps.items(), key=lambda kv: -statistics.fmean(kv[1]))},
    }


def traffic(args: argparse.Namespace, port: int, creds: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    hdrs = {"Authorization": f"Bearer {creds['key']}", "X-Engram-Principal": creds["tokens"]["usr_busy"]}
    stop_event = threading.Event()
    calls: dict[str, int] = defaultdict(int)
    errors: list[str] = []
    lock = threading.Lock()

    def loop(name: str, step: Any) -> None:
        client = Client(port, timeout=120)
        rng = random.Random(name)
        n = 0
        while not stop_event.is_set():
            method, path, body = step(rng, n)
            try:
                status, payload, _ = client.call(method, path, hdrs, body)
            except OSError as exc:
                status, payload = 0, str(exc)
            with lock:
                calls[name] += 1
                if status >= 500 or status == 0:
                    errors.append(f"{name}: {status} {str(payload)[:120]}")
            n += 1

    def retrieve(rng: random.Random, n: int) -> tuple[str, str, Any]:
        return "POST", "/api/v1/retrieve", {"query": " ".join(rng.sample(WORDS, 2)), "limit": 10}

    def write(rng: random.Random, n: int) -> tuple[str, str, Any]:
        return "POST", "/api/v1/memories", item(rng, "w", n)

    threads = [threading.Thread(target=loop, args=(f"retrieve-{i}", retrieve)) for i in range(args.retrievers)]
    threads.append(threading.Thread(target=loop, args=("write", write)))
    for t in threads:
        t.start()
    deleter = Client(port)
    jobs: list[str] = []
    load_during = []
    try:
        time.sleep(2.0)
        for memory_id in ids[:args.deletions]:
            for _ in range(20):  # a 503 says: the same request again, shortly
                status, body, _ = deleter.call("DELETE", f"/api/v1/memories/{memory_id}", hdrs)
                if status != 503:
                    break
                time.sleep(0.2)
            if status == 202:
                jobs.append(body["deletion_id"])
            else:
                errors.append(f"delete: {status} {body}")
            time.sleep(args.every)
            if len(jobs) % 10 == 0:
                load_during.append(load_average())
        wait_jobs(jobs, TIMEOUT)
    finally:
        stop_event.set()
        for t in threads:
            t.join(timeout=150)
    return {**job_figures(jobs), "calls": dict(calls), "errors": errors[:20], "error_count": len(errors),
            "load_during": load_during}


def bulk_logs(subject_id: int, tenant_id: int, memory_ids: list[str], count: int) -> None:
    """``count`` logs of the subject, each naming the first 20 records by id (what a retrieve keeps of them) and
    asking with their words: one INSERT ... SELECT."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO retrieval_retrievallog (id, tenant_id, subject_id, actor, agent_key_id, query, request,
                                               candidates, budget, dropped, timings_ms, created_at, expires_at)
            SELECT 'ret_bench' || g, %(tenant)s, %(subject)s, 'bench', NULL,
                   'what about ' || (%(words)s::text[])[1 + g %% array_length(%(words)s::text[], 1)] || ' ' || g,
                   '{}'::jsonb,
                   (SELECT jsonb_agg(jsonb_build_object('source', 'memory', 'id', m, 'memory_id', m, 'selected',
                                                        n <= 5, 'reason', CASE WHEN n <= 5 THEN NULL ELSE 'limit' END,
                                                        'score', 0.5, 'namespace', '["user","bench"]'::jsonb)
                                     ORDER BY n)
                    FROM unnest(%(ids)s::text[]) WITH ORDINALITY AS u(m, n) WHERE g >= 0),
                   '{"limit": 400, "used": 40}'::jsonb, '{}'::jsonb, '{}'::jsonb,
                   now() - make_interval(secs => g), now() + interval '30 days'
            FROM generate_series(1, %(count)s) g""",
                       {"tenant": tenant_id, "subject": subject_id, "words": WORDS, "ids": memory_ids[:20],
                        "count": count})
        cursor.execute("ANALYZE retrieval_retrievallog")


def history(args: argparse.Namespace, port: int, creds: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    from memory.models import Subject

    out: dict[str, Any] = {}
    client = Client(port)
    for name, logs in (("no_logs", 0), (f"{args.logs}_logs", args.logs)):
        subject = f"usr_{name}"
        hdrs = {"Authorization": f"Bearer {creds['key']}", "X-Engram-Principal": creds["tokens"][subject]}
        ids = seed(client, hdrs, rng, name, args.records)
        if logs:
            row = Subject.objects.get(tenant=creds["tenant"], external_id=subject)
            bulk_logs(row.pk, creds["tenant"].pk, ids, logs)
        jobs = []
        for memory_id in ids[:args.history_deletions]:  # the records every log names
            status, body, _ = client.call("DELETE", f"/api/v1/memories/{memory_id}", hdrs)
            assert status == 202, (status, body)
            jobs.append(body["deletion_id"])
            wait_jobs(jobs, TIMEOUT)
        out[name] = {**job_figures(jobs), "load": load_average()}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200, help="records of the busy subject")
    p.add_argument("--retrievers", type=int, default=3)
    p.add_argument("--deletions", type=int, default=40)
    p.add_argument("--every", type=float, default=0.5, help="seconds between two DELETEs")
    p.add_argument("--logs", type=int, default=10_000, help="retrieval logs of the history subject")
    p.add_argument("--history-deletions", type=int, default=5)
    p.add_argument("--skip-traffic", action="store_true")
    p.add_argument("--port", type=int, default=8769)
    p.add_argument("--database", default="engram_bench_deletion")
    args = p.parse_args()

    from rich.console import Console
    from rich.table import Table

    console = Console()
    before = load_average()
    console.print(f"load average before: {before}")
    use_database(args.database)
    creds = credentials("deletion", ["usr_busy", "usr_no_logs", f"usr_{args.logs}_logs"])
    server = start_serve(args.port, {"ENGRAM_THROTTLE_KEY_RATE": "off"})
    rng = random.Random(7)
    results: dict[str, Any] = {"load_before": before, "args": vars(args)}
    try:
        client = Client(args.port)
        busy = {"Authorization": f"Bearer {creds['key']}", "X-Engram-Principal": creds["tokens"]["usr_busy"]}
        ids = seed(client, busy, rng, "busy", args.records)
        client.call("POST", "/api/v1/retrieve", busy, {"query": "warm up the model", "limit": 5})
        if not args.skip_traffic:
            results["traffic"] = traffic(args, args.port, creds, ids)
            results["load_after_traffic"] = load_average()
        results["history"] = history(args, args.port, creds, rng)
    finally:
        stop(server)

    if "traffic" in results:
        t = results["traffic"]
        console.print(f"[bold]Traffic[/bold]: {args.retrievers} clients retrieving, 1 writing, one subject of "
                      f"{args.records} records, a DELETE every {args.every}s; load during {t['load_during']}, "
                      f"after {results['load_after_traffic']}")
        console.print(f"deletions {t['deletions']}, completed {t['completed']}, not completed "
                      f"{len(t['not_completed'])}, automatically retried {t['retried']}; request -> completed "
                      f"p50 {t['p50_s']:.2f} s, p95 {t['p95_s']:.2f} s, max {t['max_s']:.2f} s")
        console.print(f"client calls {t['calls']}, errors {t['error_count']} {t['errors'][:3]}")
        table = Table(title="worker time per step (ms)")
        for col in ("step", "mean", "p95", "max"):
            table.add_column(col, justify="right" if col != "step" else "left")
        for name, s in t["steps_ms"].items():
            table.add_row(name, f"{s['mean']:.1f}", f"{s['p95']:.1f}", f"{s['max']:.1f}")
        console.print(table)
    h = results["history"]
    table = Table(title=f"one deletion, {args.history_deletions} each: purge and verification (ms, mean)")
    for col in ("subject", "retrieval_logs", "verification", "purge+verification", "request->completed p50 s",
                "load"):
        table.add_column(col)
    sums = {}
    for name, figures in h.items():
        steps = figures["steps_ms"]
        logs_ms = steps.get("retrieval_logs", {}).get("mean", float("nan"))
        verify_ms = steps.get("verification", {}).get("mean", float("nan"))
        purge_ms = sum(s["mean"] for n, s in steps.items() if n != "verification")
        sums[name] = purge_ms + verify_ms
        table.add_row(name, f"{logs_ms:.1f}", f"{verify_ms:.1f}", f"{purge_ms + verify_ms:.1f}",
                      f"{figures['p50_s']:.2f}", figures["load"])
    console.print(table)
    names = list(sums)
    results["history_ratio"] = sums[names[1]] / sums[names[0]] if sums[names[0]] else float("nan")
    console.print(f"purge+verification with {args.logs} logs / with none: {results['history_ratio']:.2f}x")
    out = write_results("deletion", results)
    console.print(f"load average after: {load_average()}  ({out.relative_to(out.parent.parent.parent)})")


if __name__ == "__main__":
    main()
