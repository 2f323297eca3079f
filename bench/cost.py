"""What retrieval and conversation ingest cost, as ratios to baselines measured in the same run on the same host.

    make bench-cost                                        # sizes 600,4000,10000,100000; ingest 1000,10000,100000
    .venv/bin/python bench/cost.py --sizes 600,4000 --ingest 1000 --busy 2000      # a quick look

Set-up: a fresh database ``engram_bench_cost`` and ``manage.py serve`` on it (what ``make run`` starts).
Every figure is divided by a baseline taken in this run, so that it means the same on a fast or a slow host:

1. The embedder's own batch rate on the conversation's texts (batch 64), as one process on every core and as one
   single-threaded process per core, before the server starts and after it stops, the highest of the four: the
   baseline of ingest.
2. Conversation ingest: turns (``"type": "episodic"``, session times in ``source.occurred_at``) into one subject
   per size through ``POST /api/v1/memories/batch``; *durable* until the last call answered, *end to end* until
   health's ``derived_pending`` is 0 (embeddings, context windows, subject indexes). End to end ÷ the embedder's
   own rate, per size; and apart, *searchable*: until no embedding and no context window is pending (a large
   subject's own indexes and statistics, which only make its retrieves cheaper, may still be building).
   Every turn's text is different (``turns``).
3. Before the quiet retrieves of each size, the benchmark waits until PostgreSQL's autovacuum workers, which the
   imports set off, have finished (the seconds waited are in the JSON): a quiet retrieve is timed on a quiet host.
   The in-process floor of one retrieve: the query embedding (``get_embedder().embed_query``, 15 ms idle between
   calls, a server's pattern) plus an exact numpy top-10 over the subject's stored vectors.
4. HTTP retrieve p50/p95 per subject size, ÷ that size's floor, and where it went: the memory statement and the
   request outside the pipeline, from the server's own stage timings in each call's retrieval log.
5. Retrieve p95 on the smallest subject while ``--busy`` turns are imported into another subject ÷ its quiet p95,
   from the first batch until health's ``derived_pending`` is 0 again, and apart for its two phases: while the web
   processes write the batches, and while the worker embeds, derives the windows and builds the subject's indexes.
   Deletions of single records (DELETE → job completed and verified) during that import. The importer is a
   process of its own, as another client would be.

Prints one table with the host's cores and load average, and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import multiprocessing
import os
import random
import statistics
import time
from typing import Any

from harness import (
    Client,
    asked_once,
    credentials,
    embedder_rates,
    headers,
    load_average,
    pct,
    start_serve,
    stop,
    use_database,
    write_results,
)
from import_load import import_records

PEOPLE = ["Ana", "Ben", "Chloe", "Dev", "Ella", "Finn", "Gia", "Hugo"]
TOPICS = ["the garden", "a new job", "the marathon", "piano lessons", "the trip to Porto", "a broken bike",
          "the book club", "cooking curry", "the dog's vet visit", "moving flats", "a pottery class", "night shifts",
          "the kids' school", "a birthday party", "learning Spanish", "the football match", "painting the kitchen"]
SAYINGS = ["I finally started {t} last week", "Did you ever sort out {t}?", "Honestly {t} took most of my weekend",
           "My sister keeps asking about {t}", "We should talk about {t} over dinner", "I'm nervous about {t}",
           "Remember when we laughed about {t}?", "Thanks for helping with {t}!", "No news yet on {t}, sadly",
           "Guess what happened with {t} yesterday"]
# When and where a turn's news happened: with them, and AFTER, every turn of a conversation is a text of its own
# (``turns``).
WHEN = ["on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday", "on Saturday", "on Sunday",
        "this morning", "last night", "after lunch", "before work", "at the weekend", "in the evening",
        "over the holidays"]
WHERE = ["at the café", "at home", "at the office", "in the park", "at my parents'", "on the train",
         "at the gym", "by the river", "at the library", "in town", "at the market", "at school", "on the phone",
         "at the beach", "in the car", "at the studio", "at the pub", "at the clinic", "in the garden centre",
         "at the station"]
# A second sentence, as most turns of a real conversation have: LoCoMo's 5,882 turns have 116 characters at the
# median (130 on average), these 106.
AFTER = ["It was more fun than I expected.", "Not sure what to make of it yet.", "Tell me how yours went!",
         "It all took longer than planned.", "I will tell you the rest later.", "Everyone seemed happy with it.",
         "I could not stop thinking about it.", "It cost a bit more than we hoped.", "Let's plan the next one soon.",
         "I need a quiet evening after that.", "My mum had plenty to say about it.", "It went better than last time.",
         "I took far too many photos of it.", "It was a bit of a disaster, honestly.", "We are doing it again in May.",
         "I still have to write it all down.", "The weather nearly ruined it.", "Nobody was on time, as usual.",
         "It made my whole week, really.", "I should have asked you first."]
QUESTIONS = ["What did {p} say about {t}?", "When did {p} start {t}?", "Who helped with {t}?",
             "How does {p} feel about {t}?", "What happened with {t}?"]


def turns(rng: random.Random, count: int, prefix: str) -> list[dict[str, Any]]:
    """A conversation: sessions of 10-40 turns a few minutes apart, a day or more between sessions.

    Every turn's text differs from every other's (who, what, about what, when, where and what came of it, drawn
    without replacement from 7.6 million), as in a real conversation, and is about as long as a real turn (AFTER).
    Drawn from who, what and about what alone, 10,000 turns held 1,360 short texts, and an HNSW graph over their
    1,370 distinct vectors built in a third of the time of one over as many distinct vectors: the benchmark measured
    the subject indexes' build, and the searches through them, on copies (docs/benchmarks.md, "Turns as a real
    conversation's")."""
    at = dt.datetime(2025, 1, 1, 9, tzinfo=dt.UTC)
    bases = [len(choices) for choices in (PEOPLE, SAYINGS, TOPICS, WHEN, WHERE, AFTER)]
    left, out = 0, []
    for n, drawn in enumerate(rng.sample(range(math.prod(bases)), count)):
        if left == 0:
            at += dt.timedelta(days=rng.randint(1, 4))
            left = rng.randint(10, 40)
        at += dt.timedelta(minutes=rng.randint(1, 6))
        left -= 1
        person, saying, topic, when, where, after = _digits(drawn, bases)
        said = SAYINGS[saying].format(t=TOPICS[topic]).rstrip(".!?")
        end = SAYINGS[saying][-1] if SAYINGS[saying][-1] in "!?" else "."
        text = f"{PEOPLE[person]}: {said} {WHEN[when]} {WHERE[where]}{end} {AFTER[after]}"
        out.append({"namespace": ["user", "conversation"], "kind": "conversation_turn", "type": "episodic",
                    "fact": {"field": f"turn_{n}", "value": text}, "text": text,
                    "source": {"type": "explicit_user_statement", "event_id": f"{prefix}_{n}",
                               "occurred_at": at.isoformat()}})
    return out


def _digits(number: int, bases: list[int]) -> list[int]:
    """``number`` written in the mixed radix ``bases`` (one digit per base, the first base's digit first)."""
    digits = []
    for base in reversed(bases):
        number, digit = divmod(number, base)
        digits.append(digit)
    return digits[::-1]


def questions(rng: random.Random, count: int) -> list[str]:
    """``count`` questions never asked before in this run (``asked_once``)."""
    return [asked_once(rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(TOPICS)))
            for _ in range(count)]


# What a retrieve needs to find a turn by meaning and by its neighbours: the rest (a large subject's own indexes and
# term statistics) makes its retrieves cheaper, not more complete.
SEARCHABLE = ("embeddings", "context_windows")


def wait_derived(client: Client, started: float, timeout: float = 7200.0) -> tuple[float, float]:
    """Seconds from ``started`` until health's ``derived_pending`` was 0, and until the first poll that found no
    embedding and no context window pending (searchable)."""
    deadline = time.perf_counter() + timeout
    searchable: float | None = None
    while time.perf_counter() < deadline:
        _, body, _ = client.call("GET", "/api/v1/health", {})
        now = time.perf_counter() - started
        if searchable is None and not any(body.get("derived_pending_by_kind", {}).get(k) for k in SEARCHABLE):
            searchable = now
        if body.get("derived_pending") == 0:
            return now, searchable if searchable is not None else now
        time.sleep(0.25)
    raise RuntimeError(f"derived work still pending after {timeout}s: {body.get('derived_pending_by_kind')}")


def retrieve_times(client: Client, creds: dict[str, Any], subject: str, queries: list[str],
                   ids: list[str] | None = None) -> list[float]:
    """Each retrieve's time as the client sees it; with ``ids``, the calls' retrieval ids are collected too."""
    out = []
    for query in queries:
        status, body, ms = client.call("POST", "/api/v1/retrieve", headers(creds, subject),
                                       {"query": query, "limit": 10, "budget_tokens": 4000})
        assert status == 200, body
        out.append(ms)
        if ids is not None:
            ids.append(body["retrieval_id"])
        time.sleep(0.015)
    return out


def stage_times(ids: list[str], times: list[float]) -> dict[str, float]:
    """Where the timed retrieves' time went, from the server's own stage timings in each call's retrieval log: the
    query embedding, the memory statement with its candidates, and everything outside the pipeline (authentication,
    the throttle, the log's insert, DRF, gunicorn, the socket) as the client's time less the pipeline's."""
    from memory.retrieval.models import RetrievalLog

    logged = dict(RetrievalLog.objects.filter(pk__in=ids).values_list("pk", "timings_ms"))
    pairs = [(ms, logged[i]) for ms, i in zip(times, ids, strict=True) if i in logged]
    embed = [t["embed"] for _, t in pairs]
    memory = [t["memory"] for _, t in pairs]
    outside = [ms - t["total"] for ms, t in pairs]
    return {"embed_p50": pct(embed, 0.5), "statement_p50": pct(memory, 0.5), "statement_p95": pct(memory, 0.95),
            "outside_p50": pct(outside, 0.5), "outside_p95": pct(outside, 0.95)}


def floor_ms(subject: str, queries: list[str]) -> dict[str, float]:
    """The in-process floor: the query embedding with 15 ms idle between calls, plus an exact numpy top-10 over the
    subject's stored vectors (what any retrieve must at least do)."""
    import numpy as np

    from memory.embedder import get_embedder
    from memory.models import MemoryRecord

    embedder = get_embedder()
    vectors = np.array([list(v) for v in MemoryRecord.objects.filter(subject__external_id=subject)
                        .exclude(embedding__isnull=True).values_list("embedding", flat=True)], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embed, top = [], []
    for query in queries:
        time.sleep(0.015)
        t0 = time.perf_counter()
        q = np.asarray(embedder.embed_query(f"{query} [{random.random()}]"), dtype=np.float32)
        t1 = time.perf_counter()
        scores = vectors @ q
        np.argpartition(-scores, min(10, len(scores) - 1))[:10]
        t2 = time.perf_counter()
        embed.append((t1 - t0) * 1000)
        top.append((t2 - t1) * 1000)
    return {"embed_p50": statistics.median(embed), "topk_p50": statistics.median(top),
            "floor": statistics.median(embed) + statistics.median(top)}


def wait_autovacuum(timeout: float = 900.0) -> float:
    """Seconds until no autovacuum worker has run for two polls a second apart: the imports above leave PostgreSQL
    vacuuming and analysing the tables they filled for up to a minute after the derived work is done, and a quiet
    retrieve is timed on a quiet host."""
    from django.db import connection

    started = time.perf_counter()
    idle = 0
    while idle < 2 and time.perf_counter() - started < timeout:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
            idle = idle + 1 if cursor.fetchone()[0] == 0 else 0
        time.sleep(1.0)
    return time.perf_counter() - started


def delete_one(client: Client, creds: dict[str, Any], subject: str, memory_id: str) -> tuple[float, str]:
    hdrs = headers(creds, subject)
    started = time.perf_counter()
    status, body, _ = client.call("DELETE", f"/api/v1/memories/{memory_id}", hdrs)
    assert status == 202, body
    while True:
        _, job, _ = client.call("GET", f"/api/v1/deletions/{body['deletion_id']}", hdrs)
        if job.get("status") in ("completed", "failed"):
            return time.perf_counter() - started, job["status"]
        time.sleep(0.02)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="600,4000,10000,100000", help="records per subject for retrieve")
    p.add_argument("--ingest", default="1000,10000,100000", help="turns per subject whose ingest rate is reported")
    p.add_argument("--busy", type=int, default=10_000, help="turns imported into another subject during step 5")
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--deletions", type=int, default=15)
    p.add_argument("--port", type=int, default=8767)
    p.add_argument("--database", default="engram_bench_cost")
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    ingest_sizes = [int(s) for s in args.ingest.split(",") if s]
    every = sorted(set(sizes) | set(ingest_sizes))

    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"cores {os.cpu_count()}, load average before: {load_average()}")
    use_database(args.database)
    subjects = [f"usr_{n}" for n in every] + ["usr_busy", "usr_deleter"]
    creds = credentials("cost", subjects)
    rng = random.Random(args.seed)
    conversations = {n: turns(rng, n, f"t{n}") for n in every}
    results: dict[str, Any] = {"cores": os.cpu_count(), "load_average_at_start": load_average(), "sizes": {},
                               "ingest": {}}
    # The baseline is measured with nothing else running: before the server starts (its processes load the model
    # as they start, which slowed a measurement taken right after start-up by a quarter) and again after it stops;
    # the highest is the baseline, so a slow moment lowers the ratio, never raises it.
    sample = [i["text"] for i in conversations[max(every)][:3000]]
    rates = [rate for rate, _ in embedder_rates(sample)]
    console.print("embedder's own batch rate: " + " / ".join(f"{r:.0f}" for r in rates) + " texts/s")
    server = start_serve(args.port)
    try:
        client = Client(args.port)
        for n in every:
            console.print(f"ingesting {n:,} turns into one subject ...")
            run = import_records(args.port, creds, f"usr_{n}", conversations[n], 2, 500)
            e2e_s, searchable_s = wait_derived(client, run["started"])
            results["ingest"][n] = {"durable_rate": n / run["durable_s"], "e2e_rate": n / e2e_s,
                                    "searchable_rate": n / searchable_s, "errors": len(run["errors"])}
        for n in sizes:
            waited = wait_autovacuum()
            console.print(f"retrieving from the subject of {n:,} (after {waited:.0f} s of autovacuum) ...")
            retrieve_times(client, creds, f"usr_{n}", questions(rng, 10))  # warm every web process
            qs = questions(rng, args.queries)
            ids: list[str] = []
            times = retrieve_times(client, creds, f"usr_{n}", qs, ids)
            fl = floor_ms(f"usr_{n}", qs)
            results["sizes"][n] = {"p50": pct(times, 0.5), "p95": pct(times, 0.95), **fl, "autovacuum_wait_s": waited,
                                   "p95_over_floor": pct(times, 0.95) / fl["floor"], "stages": stage_times(ids, times)}
        console.print(f"retrieving and deleting while {args.busy:,} turns are imported into another subject ...")
        victims = []
        for k in range(args.deletions):
            status, body, _ = client.call("POST", "/api/v1/memories", headers(creds, "usr_deleter"), {
                "namespace": ["user", "notes"], "kind": "note", "fact": {"field": f"n{k}", "value": f"note {k}"},
                "text": f"Keeps a note number {k}", "source": {"type": "explicit_user_statement", "event_id": f"d{k}"}})
            assert status == 201, body
            victims.append(body["memory_id"])
        wait_derived(client, time.perf_counter())
        small = min(sizes)
        busy_turns = turns(rng, args.busy, "busy")  # drawn here: the questions below draw from the same generator
        # The importer is another client: a process of its own, so that its JSON work never holds this process's
        # interpreter lock while the retrieves below are timed.
        pool = multiprocessing.get_context("spawn").Pool(1)
        importer = pool.apply_async(import_records, (args.port, {"key": creds["key"], "tokens": creds["tokens"]},
                                                     "usr_busy", busy_turns, 2, 500))
        # Two phases: while the web processes write the batches, then while the worker embeds, derives the windows
        # and builds the subject's indexes (until health says nothing is pending). Each is reported on its own too.
        writing: list[float] = []
        deriving: list[float] = []
        deletions: list[tuple[float, str]] = []
        while not importer.ready():
            writing += retrieve_times(client, creds, f"usr_{small}", questions(rng, 5))
            if victims:
                deletions.append(delete_one(client, creds, "usr_deleter", victims.pop()))
        while client.call("GET", "/api/v1/health", {})[1].get("derived_pending") or not deriving:
            deriving += retrieve_times(client, creds, f"usr_{small}", questions(rng, 5))
            if victims:
                deletions.append(delete_one(client, creds, "usr_deleter", victims.pop()))
        run = importer.get()
        pool.close()
        wait_derived(client, run["started"])
        seconds = [d[0] for d in deletions]
        quiet = results["sizes"][small]["p95"]
        busy = writing + deriving
        results["under_import"] = {
            "subject": small, "retrieve_p95": pct(busy, 0.95), "ratio_to_quiet": pct(busy, 0.95) / quiet,
            "writing": {"n": len(writing), "p95": pct(writing, 0.95), "ratio_to_quiet": pct(writing, 0.95) / quiet},
            "deriving": {"n": len(deriving), "p95": pct(deriving, 0.95),
                         "ratio_to_quiet": pct(deriving, 0.95) / quiet},
            "deletions": len(deletions), "failed": sum(1 for d in deletions if d[1] != "completed"),
            "deletion_p50": pct(seconds, 0.5), "deletion_p95": pct(seconds, 0.95)}
    finally:
        stop(server)
    rates += [rate for rate, _ in embedder_rates(sample)]
    results["embedder_rates"] = rates
    results["embedder_rate"] = max(rates)
    for r in results["ingest"].values():
        r["share"] = r["e2e_rate"] / results["embedder_rate"]
        r["searchable_share"] = r["searchable_rate"] / results["embedder_rate"]

    table = Table(title=f"Cost as ratios to this run's baselines ({results['cores']} cores, load at start "
                        f"{results['load_average_at_start']}, at end {load_average()})")
    table.add_column("measure")
    table.add_column("figure", justify="right")
    table.add_column("ratio", justify="right")
    table.add_row("embedder's own batch rate (baseline of ingest; the highest of one process on every core and one "
                  "single-threaded process per core, before the server started and after it stopped: "
                  f"{' / '.join(f'{r:.0f}' for r in rates)})", f"{results['embedder_rate']:.0f} texts/s", "1")
    for n in ingest_sizes:
        r = results["ingest"][n]
        table.add_row(f"turn ingest end to end, {n:,} turns in one subject (durable {r['durable_rate']:.0f}/s)",
                      f"{r['e2e_rate']:.0f} turns/s", f"{r['share']:.0%} of own rate")
        table.add_row("  of which searchable (embeddings and windows derived; the subject's indexes may follow)",
                      f"{r['searchable_rate']:.0f} turns/s", f"{r['searchable_share']:.0%} of own rate")
    for n in sizes:
        r = results["sizes"][n]
        table.add_row(f"in-process floor at {n:,} (embed {r['embed_p50']:.1f} + top-10 {r['topk_p50']:.2f} ms)",
                      f"{r['floor']:.1f} ms", "1")
        table.add_row(f"HTTP retrieve p50 / p95 at {n:,} records (timed after {r['autovacuum_wait_s']:.0f} s of "
                      "autovacuum)", f"{r['p50']:.1f} / {r['p95']:.1f} ms",
                      f"p95 {r['p95_over_floor']:.2f}× floor")
        st = r["stages"]
        table.add_row(f"  of which the memory statement p50 / p95 (the query embedding p50 {st['embed_p50']:.1f} ms)",
                      f"{st['statement_p50']:.1f} / {st['statement_p95']:.1f} ms",
                      f"p95 {st['statement_p95'] / r['floor']:.2f}× floor")
        table.add_row("  and outside the pipeline p50 / p95 (authentication, throttle, log, HTTP)",
                      f"{st['outside_p50']:.1f} / {st['outside_p95']:.1f} ms",
                      f"p95 {st['outside_p95'] / r['floor']:.2f}× floor")
    u = results["under_import"]
    table.add_row(f"retrieve p95 at {u['subject']:,} during a {args.busy:,}-turn import",
                  f"{u['retrieve_p95']:.1f} ms", f"{u['ratio_to_quiet']:.2f}× quiet")
    for phase, label in (("writing", "while its batches are written"), ("deriving", "while the worker derives")):
        table.add_row(f"  of which {label} ({u[phase]['n']} retrieves)", f"{u[phase]['p95']:.1f} ms",
                      f"{u[phase]['ratio_to_quiet']:.2f}× quiet")
    table.add_row(f"deletion p50 / p95 during that import ({u['deletions']}, failed {u['failed']})",
                  f"{u['deletion_p50']:.2f} / {u['deletion_p95']:.2f} s", "")
    console.print(table)
    out = write_results("cost", results)
    console.print(f"written {out.name}")


if __name__ == "__main__":
    main()
