"""A bounded loopback soak against `manage.py serve`: several client processes, a mix of every kind of call.

    .venv/bin/python bench/soak.py                      # 60 s, 4 client processes
    .venv/bin/python bench/soak.py --seconds 30 --clients 2

Set-up: a fresh database ``engram_bench_soak`` and ``manage.py serve`` on it, as ``make run`` starts it
(gunicorn, 2 processes x 4 threads, a worker per queue). Rate limits are turned off for the run (one agent
key per client process would otherwise meet the default 6,000/min per key); everything else is default.

Each client process, with its own agent key and subjects, loops for ``--seconds`` over: single writes
(POST /memories), batch writes (POST /memories/batch, 50 items), retrieves, fact reads (GET /facts), thread
appends (POST /threads/{id}/events) and deletions (DELETE /memories/{id}, whose completion a background
thread watches on GET /deletions/{id}). Then every write the server acknowledged is read back.

Prints throughput, p50/p95/p99 per endpoint, errors (must be 0), acknowledged writes later unreadable (must
be 0), deletion completion times, and the resident memory of the serve process tree at start and end;
writes JSON to bench/results/. The loop is bounded in time and count and only talks to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import threading
import time
from collections import defaultdict
from typing import Any

from harness import Client, credentials, load_average, pct, start_serve, stop, tree_rss_mb, use_database, write_results

MIX = [("write", 30), ("batch", 5), ("retrieve", 25), ("fact", 15), ("append", 20), ("delete", 5)]
WORDS = ["aisle", "window", "vegetarian", "Lisbon", "Munich", "early", "quiet", "train", "hotel", "invoice",
         "standing desk", "green tea", "metric", "Porto", "Oslo", "late check-out"]
MAX_CALLS = 200_000  # per client: a hard bound besides the clock


def client_loop(index: int, port: int, key: str, tokens: dict[str, str], threads: dict[str, str], seconds: float,
                seed: int, out: Any) -> None:
    rng = random.Random(seed + index)
    client = Client(port, timeout=120)
    subjects = list(tokens)
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    acked: list[tuple[str, str, str, str]] = []  # (subject, memory_id, field, value)
    appended: dict[str, int] = defaultdict(int)
    deleted: set[str] = set()
    deletions: list[tuple[str, str, float]] = []  # (subject, job id, started)
    done: list[float] = []
    lock = threading.Lock()
    finished = threading.Event()

    def hdrs(subject: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}", "X-Engram-Principal": tokens[subject]}

    def watch_deletions() -> None:
        watcher = Client(port, timeout=120)
        while True:
            with lock:
                pending = list(deletions)
            if not pending and finished.is_set():
                return
            for subject, job, started in pending:
                status, body, _ = watcher.call("GET", f"/api/v1/deletions/{job}", hdrs(subject))
                state = body.get("status") if isinstance(body, dict) else None
                if status != 200 or state == "failed":
                    with lock:
                        errors.append(f"deletion {job}: {status} {state}")
                        deletions.remove((subject, job, started))
                elif state == "completed":
                    with lock:
                        done.append(time.perf_counter() - started)
                        deletions.remove((subject, job, started))
            time.sleep(0.1)

    def call(kind: str, method: str, path: str, subject: str, body: Any = None, ok: tuple[int, ...] = (200, 201)
             ) -> Any:
        try:
            status, payload, ms = client.call(method, path, hdrs(subject), body)
        except OSError as exc:
            errors.append(f"{kind}: {type(exc).__name__}")
            return None
        latencies[kind].append(ms)
        if status not in ok:
            errors.append(f"{kind}: {status} {str(payload)[:160]}")
            return None
        return payload

    def item(subject: str, n: int) -> dict[str, Any]:
        # Unique words per record: a deletion's verification rightly fails while another live record of the
        # subject still says the very same thing.
        words = f"{' '.join(rng.sample(WORDS, 3))} {index}-{n}"
        field = f"f_{index}_{n}"
        return {"namespace": ["user", "soak"], "kind": "note", "fact": {"field": field, "value": words},
                "text": f"Mentioned {words}", "source": {"type": "explicit_user_statement",
                                                          "event_id": f"e_{index}_{n}"}}

    watcher = threading.Thread(target=watch_deletions)
    watcher.start()
    kinds, weights = zip(*MIX, strict=True)
    deadline = time.perf_counter() + seconds
    n = calls = 0
    while time.perf_counter() < deadline and calls < MAX_CALLS:
        calls += 1
        kind = rng.choices(kinds, weights)[0]
        subject = rng.choice(subjects)
        if kind == "write":
            n += 1
            body = item(subject, n)
            payload = call(kind, "POST", "/api/v1/memories", subject, body)
            if payload:
                acked.append((subject, payload["memory_id"], body["fact"]["field"], body["fact"]["value"]))
        elif kind == "batch":
            items = []
            for _ in range(50):
                n += 1
                items.append(item(subject, n))
            payload = call(kind, "POST", "/api/v1/memories/batch", subject, {"items": items})
            if payload:
                for sent, result in zip(items, payload["results"], strict=True):
                    if result["status"] == "error":
                        errors.append(f"batch item: {result['code']}")
                    else:
                        acked.append((subject, result["memory_id"], sent["fact"]["field"], sent["fact"]["value"]))
        elif kind == "retrieve":
            call(kind, "POST", "/api/v1/retrieve", subject, {"query": " ".join(rng.sample(WORDS, 2)), "limit": 5})
        elif kind == "fact":
            mine = [a for a in acked if a[0] == subject and a[1] not in deleted]
            if mine:
                _, memory_id, field, value = rng.choice(mine)
                payload = call(kind, "GET", f"/api/v1/facts?namespace=user/soak&field={field}", subject)
                if payload and payload["fact"]["value"] != value:
                    errors.append(f"fact {field}: read {payload['fact']['value']!r}, wrote {value!r}")
        elif kind == "append":
            payload = call(kind, "POST", f"/api/v1/threads/{threads[subject]}/events", subject,
                           {"kind": "message", "role": "user", "text": f"message {n} about {rng.choice(WORDS)}"})
            if payload:
                appended[subject] += 1
        elif kind == "delete":
            mine = [a for a in acked if a[0] == subject and a[1] not in deleted]
            if mine:
                victim = rng.choice(mine)
                started = time.perf_counter()
                payload = call(kind, "DELETE", f"/api/v1/memories/{victim[1]}", subject, ok=(202,))
                if payload:
                    deleted.add(victim[1])
                    with lock:
                        deletions.append((subject, payload["deletion_id"], started))
    finished.set()
    watcher.join(timeout=300)
    # Read back every acknowledged write and every acknowledged thread append.
    unreadable = 0
    for subject, memory_id, _, value in acked:
        if memory_id in deleted:
            continue
        status, payload, _ = client.call("GET", f"/api/v1/memories/{memory_id}", hdrs(subject))
        if status != 200 or payload.get("status") != "active" or payload["fact"]["value"] != value:
            unreadable += 1
    for subject, count in appended.items():
        seen, after = 0, 0
        while True:
            path = f"/api/v1/threads/{threads[subject]}/events?limit=500&after={after}"
            status, payload, _ = client.call("GET", path, hdrs(subject))
            if status != 200:
                break
            seen += len(payload["results"])
            if payload.get("next_after") is None:
                break
            after = payload["next_after"]
        unreadable += max(0, count - seen)
    out.put({"latencies": dict(latencies), "errors": errors, "unreadable": unreadable, "acked": len(acked),
             "appended": dict(appended), "deletions": done, "deletions_unfinished": len(deletions),
             "calls": calls})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--clients", type=int, default=4, help="client processes")
    p.add_argument("--subjects", type=int, default=3, help="subjects per client process")
    p.add_argument("--port", type=int, default=8767)
    p.add_argument("--database", default="engram_bench_soak")
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args()

    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"load average before: {load_average()}")
    use_database(args.database)
    clients = []
    for c in range(args.clients):
        creds = credentials(f"soak{c}", [f"usr_{c}_{s}" for s in range(args.subjects)])
        clients.append(creds)
    server = start_serve(args.port, {"ENGRAM_THROTTLE_KEY_RATE": "off"})
    try:
        warm = Client(args.port)
        threads: list[dict[str, str]] = []
        for creds in clients:
            mine = {}
            for subject, token in creds["tokens"].items():
                hdrs = {"Authorization": f"Bearer {creds['key']}", "X-Engram-Principal": token}
                status, body, _ = warm.call("POST", "/api/v1/threads", hdrs, {"title": "soak"})
                assert status == 201, body
                mine[subject] = body["thread_id"]
                warm.call("POST", "/api/v1/retrieve", hdrs, {"query": "warm up"})
            threads.append(mine)
        rss_start = tree_rss_mb(server.pid)
        load_at_start = load_average()
        console.print(f"serve process tree at start: {rss_start:.0f} MiB; soaking {args.seconds:.0f} s with "
                      f"{args.clients} client processes ...")
        queue: Any = mp.Queue()
        procs = [mp.Process(target=client_loop, args=(i, args.port, c["key"], c["tokens"], threads[i],
                                                      args.seconds, args.seed, queue))
                 for i, c in enumerate(clients)]
        started = time.perf_counter()
        for proc in procs:
            proc.start()
        results = [queue.get(timeout=args.seconds + 900) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
        wall = time.perf_counter() - started
        rss_end = tree_rss_mb(server.pid)
    finally:
        stop(server)

    latencies: dict[str, list[float]] = defaultdict(list)
    for r in results:
        for kind, values in r["latencies"].items():
            latencies[kind].extend(values)
    calls = sum(len(v) for v in latencies.values())
    errors = [e for r in results for e in r["errors"]]
    deletions = [d for r in results for d in r["deletions"]]
    summary: dict[str, Any] = {
        "seconds": args.seconds, "clients": args.clients, "calls": calls,
        "throughput_per_s": calls / args.seconds,
        "endpoints": {k: {"count": len(v), "p50_ms": pct(v, 0.5), "p95_ms": pct(v, 0.95), "p99_ms": pct(v, 0.99)}
                      for k, v in sorted(latencies.items())},
        "errors": len(errors), "error_samples": errors[:20],
        "acknowledged_writes": sum(r["acked"] for r in results),
        "acknowledged_unreadable": sum(r["unreadable"] for r in results),
        "deletions": {"completed": len(deletions), "unfinished": sum(r["deletions_unfinished"] for r in results),
                      "p50_s": pct(deletions, 0.5), "p95_s": pct(deletions, 0.95),
                      "max_s": max(deletions) if deletions else None},
        "serve_rss_mib": {"start": rss_start, "end": rss_end}, "wall_s": wall,
        "load_average_at_start": load_at_start,
    }
    table = Table(title=f"Soak: {args.seconds:.0f} s, {args.clients} client processes, {calls} calls "
                        f"({summary['throughput_per_s']:.0f}/s)")
    for column in ("endpoint", "calls", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column, justify="right" if column != "endpoint" else "left")
    for kind, row in summary["endpoints"].items():
        table.add_row(kind, str(row["count"]), f"{row['p50_ms']:.0f}", f"{row['p95_ms']:.0f}", f"{row['p99_ms']:.0f}")
    console.print(table)
    d = summary["deletions"]
    console.print(f"errors: {summary['errors']}  acknowledged writes: {summary['acknowledged_writes']}  "
                  f"unreadable afterwards: {summary['acknowledged_unreadable']}")
    if deletions:
        console.print(f"deletions completed (verified): {d['completed']}, unfinished: {d['unfinished']}, "
                      f"p50 {d['p50_s']:.2f} s, p95 {d['p95_s']:.2f} s, max {d['max_s']:.2f} s")
    console.print(f"serve process tree memory: {rss_start:.0f} MiB at start, {rss_end:.0f} MiB at the end")
    for sample in summary["error_samples"]:
        console.print(f"  error: {sample}")
    out = write_results("soak", summary)
    console.print(f"load average at the end: {summary['load_average_at_end']}; written {out.name}")


if __name__ == "__main__":
    main()
