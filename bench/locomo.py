"""LoCoMo development benchmark: the protocol of ../shared/datasets/locomo/README.md, through HTTP.

    .venv/bin/python bench/locomo.py                 # fresh database, ingest, 1,536 queries (make bench-locomo)
    .venv/bin/python bench/locomo.py --reuse         # keep an ingested database, only query (fast re-runs)
    .venv/bin/python bench/locomo.py --reuse --reindex   # re-derive the retrieval index (manage.py reembed) first

Steps: (1) unless ``--reuse`` finds a complete load, drop and migrate its own database (``engram_locomo``; the
app database is never touched); (2) start ``manage.py serve`` (gunicorn + the django-q2 worker) on that
database; (3) one tenant per conversation, every turn one memory through ``POST /api/v1/memories/batch``
(200 items per call, session order, the session date as ``source.occurred_at``), then wait until the worker
has derived every embedding and context; (4) every question of categories 1-4 with usable evidence, verbatim,
one at a time, ``limit`` 10, ``budget_tokens`` 4000, in its conversation's tenant; (5) recall@5/@10 per
category and overall, a BM25 baseline on the same turns in the same run (Okapi, k1 1.5, b 0.75, lower-cased
alphanumeric tokens, a small stop list, no stemming), HTTP p50/p95, the query embedding's p50 (the server's
own timing from each retrieval log), and cross-tenant hits (must be 0). Prints a table; writes JSON to
bench/results/. Skips with a message when the data set is absent.

Two-fold protocol (``--folds``, ``make bench-recall``): the conversations are split into two fixed halves (the
first and the second half of the file's order). Every configuration of the grid (``--grid``: the tunable choices
of ranking as ENGRAM_RECALL_* settings, docs/retrieval.md "Tunable choices") is run on all questions, the server
restarted with its settings; the configuration with the best recall@10 on one half is reported on the other, both
ways. With ``--paraphrase``, a configuration that breaks the paraphrase set's promises (``admissible``) is not
chosen. The report prints held-in and held-out recall side by side per category, the gap, and BM25 on the same
questions. ``--paraphrase`` also scores the everyday paraphrase set (bench/paraphrase.py) on the same server with
the shipped settings, against exact MiniLM alone in the same run, in the same table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from retrieval import http_call, load_average, open_database, pct, reset_database, wait_for_health  # noqa: E402

# The shared data sets folder beside the checkout (or --dataset); never copied into the repository.
DATASET = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
BATCH = 200
STOP = frozenset({"a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "about", "to",
                  "from", "in", "on", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that",
                  "these", "those", "i", "you", "he", "she", "we", "they", "me", "my", "your", "his", "her", "our",
                  "their", "what", "which", "who", "whom", "when", "where", "why", "how", "do", "does", "did",
                  "have", "has", "had", "not", "no", "so", "as"})


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DATASET)
    p.add_argument("--database", default="engram_locomo")
    p.add_argument("--port", type=int, default=8102)
    p.add_argument("--reuse", action="store_true", help="keep a complete earlier load of the same database")
    p.add_argument("--reindex", action="store_true", help="with --reuse: rebuild derived data (manage.py reembed)")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--budget", type=int, default=4000)
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations (quick checks)")
    p.add_argument("--label", default="", help="a name for this run in the JSON (e.g. the change measured)")
    p.add_argument("--folds", action="store_true", help="two-fold protocol over the --grid of tunable choices")
    p.add_argument("--grid", type=Path, default=None,
                   help="YAML list of configurations ({name, env: {ENGRAM_RECALL_…: value}}); default: GRID")
    p.add_argument("--paraphrase", action="store_true", help="also score bench/paraphrase_set.yaml (same server)")
    return p.parse_args()


# The tunable choices the two-fold protocol chooses among (each a set of ENGRAM_RECALL_* settings; the first is
# the shipped defaults). Small on purpose: every configuration costs one pass over the 1,536 questions.
GRID: list[dict[str, Any]] = [
    {"name": "shipped", "env": {}},
    {"name": "no centroid", "env": {"ENGRAM_RECALL_GENERIC": "0"}},
    {"name": "centroid 0.15", "env": {"ENGRAM_RECALL_GENERIC": "0.15"}},
    {"name": "centroid 0.45", "env": {"ENGRAM_RECALL_GENERIC": "0.45"}},
    {"name": "BM25 k1 1.0", "env": {"ENGRAM_RECALL_BM25_K1": "1.0"}},
    {"name": "no knee in small memories", "env": {"ENGRAM_RECALL_LEXICAL_KNEE": "0"}},
]


# --- the data set -----------------------------------------------------------------------------------------------

def load_conversations(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """Turns in session order as the protocol writes them, and the usable questions of categories 1-4."""
    out = []
    for sample in json.loads(path.read_text())[:limit]:
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        turns = []
        for n in sessions:
            when = dt.datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").replace(
                tzinfo=dt.UTC)
            for turn in conv[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                turns.append({"dia_id": turn["dia_id"], "text": text, "occurred_at": when.isoformat()})
        known = {t["dia_id"] for t in turns}
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence: list[str] = []
            for raw in qa.get("evidence", []):
                for m in EVIDENCE.finditer(raw):
                    dia = f"D{int(m.group(1))}:{int(m.group(2))}"
                    if dia in known and dia not in evidence:
                        evidence.append(dia)
            if evidence:
                questions.append({"question": qa["question"], "evidence": evidence, "category": qa["category"]})
        out.append({"sample_id": sample["sample_id"], "turns": turns, "questions": questions})
    return out


def field_of(dia_id: str) -> str:
    return "turn_" + dia_id.lower().replace(":", "_")


def batch_item(sample_id: str, turn: dict[str, Any]) -> dict[str, Any]:
    field = field_of(turn["dia_id"])
    return {"namespace": ["user", "conversation"], "kind": "conversation_turn", "type": "episodic",
            "fact": {"field": field, "value": turn["text"]}, "text": turn["text"],
            "source": {"type": "explicit_user_statement", "event_id": f"evt_{sample_id}_{field[5:]}",
                       "occurred_at": turn["occurred_at"]}}


# --- the BM25 baseline (the reference's Okapi) -------------------------------------------------------------------

def tokens(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]


def bm25_top(turns: list[dict[str, Any]], query: str, k: int, k1: float = 1.5, b: float = 0.75) -> list[str]:
    docs = [Counter(tokens(t["text"])) for t in turns]
    lengths = [sum(d.values()) for d in docs]
    avg = sum(lengths) / len(lengths)
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    scores = [0.0] * n
    for w in set(tokens(query)):
        if w not in df:
            continue
        idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
        for i, d in enumerate(docs):
            tf = d.get(w, 0)
            if tf:
                scores[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[i] / avg))
    order = sorted(range(n), key=lambda i: (-scores[i], i))
    return [turns[i]["dia_id"] for i in order[:k] if scores[i] > 0]


# --- metrics -----------------------------------------------------------------------------------------------------

def recall(found: list[str], evidence: list[str], k: int) -> float:
    return len(set(found[:k]) & set(evidence)) / len(evidence)


def summarise(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in (5, 10):
        per: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            value = recall(r[key], r["evidence"], k)
            per[CATEGORIES[r["category"]]].append(value)
            per["overall"].append(value)
        out[f"recall@{k}"] = {name: round(statistics.mean(v), 4) for name, v in per.items()}
    out["n"] = {CATEGORIES[c]: sum(r["category"] == c for r in rows) for c in CATEGORIES} | {"overall": len(rows)}
    return out


# --- the run -----------------------------------------------------------------------------------------------------

def main() -> None:  # noqa: C901 - a linear script, step by step
    args = parse()
    if not args.dataset.exists():
        print(f"LoCoMo is not available at {args.dataset}: skipping the benchmark. (It is read from "
              "../shared/datasets/locomo/locomo10.json beside the checkout and never copied into the repository.)")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(width=120)
    conversations = load_conversations(args.dataset, args.conversations)
    total_turns = sum(len(c["turns"]) for c in conversations)
    open_database(args.database, reuse=args.reuse, console=console)
    from django.core.management import call_command

    from memory.identity.services import agent_key_create, principal_token_mint, tenant_create
    from memory.models import MemoryRecord, Tenant
    from memory.retrieval.models import RetrievalLog

    def slug(sample_id: str) -> str:
        return f"locomo-{sample_id}"

    complete = all(MemoryRecord.objects.filter(tenant__slug=slug(c["sample_id"]), status="active").count()
                   == len(c["turns"]) for c in conversations)
    ingest = not (args.reuse and complete)
    if ingest and args.reuse:
        console.print("no complete earlier load: ingesting")
        reset_database(args.database)
        call_command("migrate", verbosity=0)
        call_command("createcachetable", verbosity=0)
    if not ingest and args.reindex:
        console.print("re-deriving the retrieval index (manage.py reembed)")
        call_command("reembed")
    if not ingest:  # a load made before subjects had centroids gets them, as the worker's schedule would give them
        from memory.retrieval.centroid import refresh_missing

        refresh_missing()
    keys: dict[str, dict[str, str]] = {}
    for c in conversations:
        tenant = Tenant.objects.filter(slug=slug(c["sample_id"])).first() or tenant_create(slug=slug(c["sample_id"]))
        _, raw = agent_key_create(tenant=tenant, name=f"bench-{time.time():.0f}", permissions=["read", "write"])
        token, _, _ = principal_token_mint(tenant=tenant, subject_external_id="user", ttl=86400)
        keys[c["sample_id"]] = {"Authorization": f"Bearer {raw}", "X-Engram-Principal": token}

    grid = (yaml_list(args.grid) if args.grid else GRID) if args.folds else [{"name": "shipped", "env": {}}]
    server = serve(args, grid[0]["env"])
    runs: list[dict[str, Any]] = []
    paraphrase: dict[str, Any] | None = None
    try:
        wait_for_health(args.port)
        ingest_seconds = None
        if ingest:
            started = time.perf_counter()
            with console.status("ingesting") as status:
                for c in conversations:
                    items = [batch_item(c["sample_id"], t) for t in c["turns"]]
                    for start in range(0, len(items), BATCH):
                        code, body, _ = http_call(args.port, "POST", "/api/v1/memories/batch", keys[c["sample_id"]],
                                                  {"items": items[start:start + BATCH]})
                        assert code == 200 and body["error"] == 0, body
                        status.update(f"ingesting {c['sample_id']} {start + BATCH}/{len(items)}")
            ingest_seconds = time.perf_counter() - started
        wait_for_derived(console, MemoryRecord, total_turns)
        for n, config in enumerate(grid):
            if n:
                stop(server)
                server = serve(args, config["env"])
                wait_for_health(args.port)
            console.print(f"configuration {n + 1}/{len(grid)}: {config['name']} {config['env']}")
            runs.append({**config, **query_all(args, console, conversations, keys, slug, MemoryRecord,
                                               RetrievalLog)})
            if args.paraphrase:  # every configuration: the first one's goes in the table, all in the JSON
                runs[-1]["paraphrase"] = run_paraphrase(args, console)
                paraphrase = paraphrase or runs[-1]["paraphrase"]
    finally:
        stop(server)
    results = runs[0]
    results["ingest_seconds"] = round(ingest_seconds, 1) if ingest_seconds else None
    if args.folds:
        results["folds"] = two_fold(runs, [c["sample_id"] for c in conversations])
        results["by_configuration"] = by_configuration(runs, results["folds"]["halves"])
    if paraphrase is not None:
        results["paraphrase"] = paraphrase
        results["paraphrase_by_configuration"] = {
            run["name"]: {k: run["paraphrase"]["engram"][k] for k in ("top1", "top3", "empty", "no_match_packets")}
            for run in runs}
    report(args, console, Table, results)


def yaml_list(path: Path) -> list[dict[str, Any]]:
    import yaml

    return list(yaml.safe_load(path.read_text()))


def serve(args: Any, settings_env: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ENGRAM_DB_NAME": args.database, "ENGRAM_LOG_LEVEL": "WARNING",
           **{k: str(v) for k, v in settings_env.items()}}
    return subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(args.port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, start_new_session=True)


def stop(server: subprocess.Popen[bytes]) -> None:
    os.killpg(server.pid, 15)
    server.wait(timeout=60)


def admissible(run: dict[str, Any]) -> bool:
    """Whether the protocol may choose this configuration: with ``--paraphrase``, only one that keeps the everyday
    set's promises in the same run (top-1 at least exact MiniLM alone's, no empty answer when the answer is stored,
    no strong packet for a question about something never said). Recall on LoCoMo bought by trusting shared words
    more would otherwise be chosen at the price of the everyday questions that share none."""
    para = run.get("paraphrase")
    if para is None:
        return True
    ours, alone = para["engram"], para["minilm_alone"]
    return bool(ours["top1"] >= alone["top1"] and ours["empty"] == 0 and ours["no_match_with_strong"] == 0)


def two_fold(runs: list[dict[str, Any]], sample_ids: list[str]) -> dict[str, Any]:
    """Choose the configuration on one half, report it on the other, both ways (fixed halves: file order). Only
    ``admissible`` configurations are chosen from (all of them if none is)."""
    half = len(sample_ids) // 2
    folds = {"A": set(sample_ids[:half]), "B": set(sample_ids[half:])}
    choosable = [run for run in runs if admissible(run)] or runs
    names = {run["name"] for run in choosable}
    out: dict[str, Any] = {"halves": {k: sorted(v) for k, v in folds.items()}, "directions": [],
                           "not_admissible": [run["name"] for run in runs if run["name"] not in names]}
    for tune, test in (("A", "B"), ("B", "A")):
        scored = [(summarise([r for r in run["rows"] if r["sample_id"] in folds[tune]], "engram"), run)
                  for run in choosable]
        best_in, chosen = max(scored, key=lambda pair: pair[0]["recall@10"]["overall"])
        test_rows = [r for r in chosen["rows"] if r["sample_id"] in folds[test]]
        out["directions"].append({
            "tuned_on": tune, "reported_on": test, "chosen": chosen["name"], "env": chosen["env"],
            "held_in": best_in, "held_out": summarise(test_rows, "engram"),
            "bm25_held_out": summarise(test_rows, "bm25"),
            "grid_on_tuning_half": {run["name"]: s["recall@10"]["overall"] for s, run in scored}})
    # Both folds together: each question scored by the configuration chosen on the other half.
    held_out_rows = [r for d in out["directions"] for run in runs if run["name"] == d["chosen"]
                     for r in run["rows"] if r["sample_id"] in folds[d["reported_on"]]]
    held_in_rows = [r for d in out["directions"] for run in runs if run["name"] == d["chosen"]
                    for r in run["rows"] if r["sample_id"] in folds[d["tuned_on"]]]
    out["held_out"] = summarise(held_out_rows, "engram")
    out["held_in"] = summarise(held_in_rows, "engram")
    out["bm25"] = summarise(held_out_rows, "bm25")
    return out


def by_configuration(runs: list[dict[str, Any]], halves: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Every configuration on each half, with its times as a ratio to the first (the shipped) in the same run."""
    first = runs[0]
    out = []
    for run in runs:
        out.append({
            "name": run["name"], "env": run["env"],
            "halves": {name: summarise([r for r in run["rows"] if r["sample_id"] in ids], "engram")
                       for name, ids in halves.items()},
            "http_ms": run["http_ms"], "retrieve_ms": run["retrieve_ms"],
            "retrieve_ratio": round(run["retrieve_ms"]["mean"] / first["retrieve_ms"]["mean"], 2),
            "http_ratio": round(run["http_ms"]["p50"] / first["http_ms"]["p50"], 2)})
    return out


def run_paraphrase(args: Any, console: Any) -> dict[str, Any]:
    import paraphrase

    from memory.identity.services import agent_key_create, principal_token_mint, tenant_create
    from memory.models import Tenant

    data = paraphrase.load()
    tenant = Tenant.objects.filter(slug=f"paraphrase-{time.time():.0f}").first() or tenant_create(
        slug=f"paraphrase-{time.time():.0f}")
    _, raw = agent_key_create(tenant=tenant, name="bench-paraphrase", permissions=["read", "write"])
    headers: dict[str, dict[str, str]] = {}

    def headers_for(name: str) -> dict[str, str]:
        if name not in headers:
            token, _, _ = principal_token_mint(tenant=tenant, subject_external_id=name, ttl=86400)
            headers[name] = {"Authorization": f"Bearer {raw}", "X-Engram-Principal": token}
        return headers[name]

    with console.status("paraphrase set"):
        ours = paraphrase.run(args.port, http_call, headers_for, data)
        alone = paraphrase.minilm_alone(data)
    return {"set": paraphrase.describe(data), "engram": ours, "minilm_alone": alone}



def wait_for_derived(console: Any, MemoryRecord: Any, total: int) -> None:
    """The worker derives embeddings (and the retrieval index) after each batch commits: wait for all of it."""
    from memory.retrieval import context

    started = time.perf_counter()
    with console.status("waiting for the worker to derive embeddings") as status:
        while True:
            pending = MemoryRecord.objects.filter(tenant__slug__startswith="locomo-", embedding__isnull=True).count()
            pending += context.pending_count(tenant_slug_prefix="locomo-")
            status.update(f"waiting for the worker: {pending} records still to derive ({total} turns)")
            if pending == 0:
                break
            time.sleep(1.0)
    console.print(f"derived data complete after {time.perf_counter() - started:.1f} s of waiting")


def query_all(args: Any, console: Any, conversations: list[dict[str, Any]], keys: dict[str, dict[str, str]],
              slug: Any, MemoryRecord: Any, RetrievalLog: Any) -> dict[str, Any]:
    # Warm every gunicorn worker (model load) with queries that are not part of the set.
    first = conversations[0]
    for n in range(12):
        http_call(args.port, "POST", "/api/v1/retrieve", keys[first["sample_id"]],
                  {"query": f"warm-up question number {n} about the weekend", "limit": args.limit})
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    log_ids: list[str] = []
    cross_tenant = 0
    total = sum(len(c["questions"]) for c in conversations)
    with console.status("querying") as status:
        for c in conversations:
            field_to_dia = {field_of(t["dia_id"]): t["dia_id"] for t in c["turns"]}
            by_id = dict(MemoryRecord.objects.filter(tenant__slug=slug(c["sample_id"])).values_list("pk", "field"))
            for q in c["questions"]:
                code, body, ms = http_call(args.port, "POST", "/api/v1/retrieve", keys[c["sample_id"]],
                                           {"query": q["question"], "limit": args.limit,
                                            "budget_tokens": args.budget})
                assert code == 200, body
                latencies.append(ms)
                log_ids.append(body["retrieval_id"])
                found = []
                for packet in body["packets"]:
                    field = by_id.get(packet.get("memory_id"))
                    if field is None:
                        cross_tenant += 1
                        continue
                    found.append(field_to_dia[field])
                rows.append({**q, "sample_id": c["sample_id"], "engram": found,
                             "bm25": bm25_top(c["turns"], q["question"], 10)})
                if len(rows) % 50 == 0:
                    status.update(f"querying {len(rows)}/{total}")
    timings = list(RetrievalLog.objects.filter(pk__in=log_ids).values_list("timings_ms", flat=True))
    embed_ms = [log["embed"] for log in timings if "embed" in log]
    # The server's own time for the whole retrieve (every round of it), without HTTP and the log's insert.
    total_ms = [log["total"] for log in timings if "total" in log]
    return {"engram": summarise(rows, "engram"), "bm25": summarise(rows, "bm25"), "rows": rows,
            "http_ms": {"p50": round(statistics.median(latencies), 2), "p95": round(pct(latencies, 0.95), 2),
                        "n": len(latencies)},
            "query_embedding_ms": {"p50": round(statistics.median(embed_ms), 2),
                                   "p95": round(pct(embed_ms, 0.95), 2), "n": len(embed_ms)},
            "retrieve_ms": {"p50": round(statistics.median(total_ms), 2), "p95": round(pct(total_ms, 0.95), 2),
                            "mean": round(statistics.mean(total_ms), 2), "n": len(total_ms)},
            "cross_tenant_hits": cross_tenant,
            "questions": len(rows), "turns": sum(len(c["turns"]) for c in conversations)}


def report(args: Any, console: Any, Table: Any, results: dict[str, Any]) -> None:
    table = Table(title=f"LoCoMo, categories 1-4, n = {results['questions']} ({results['turns']} turns), "
                        f"limit {args.limit}, budget {args.budget} tokens, through HTTP")
    for column in ("category", "n", "Engram r@5", "Engram r@10", "BM25 r@5", "BM25 r@10", "r@10 - BM25"):
        table.add_column(column, justify="left" if column == "category" else "right")
    ours, bm25 = results["engram"], results["bm25"]
    for name in [*CATEGORIES.values(), "overall"]:
        delta = ours["recall@10"][name] - bm25["recall@10"][name]
        table.add_row(name, str(ours["n"][name]), f"{ours['recall@5'][name]:.3f}", f"{ours['recall@10'][name]:.3f}",
                      f"{bm25['recall@5'][name]:.3f}", f"{bm25['recall@10'][name]:.3f}", f"{delta:+.3f}")
    console.print(table)
    if "folds" in results or "paraphrase" in results:
        console.print(recall_table(Table, results))
    http, emb = results["http_ms"], results["query_embedding_ms"]
    console.print(f"HTTP retrieve p50 {http['p50']:.1f} ms, p95 {http['p95']:.1f} ms (single client, "
                  f"{http['n']} queries); query embedding p50 {emb['p50']:.2f} ms (server timing); "
                  f"cross-tenant hits {results['cross_tenant_hits']}")
    results.pop("rows", None)
    results["label"] = args.label
    results["command"] = "bench/locomo.py " + " ".join(sys.argv[1:])
    results["load_average_at_end"] = load_average()
    out = ROOT / "bench" / "results" / f"locomo-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    console.print(f"load average (1/5/15 min) at the end: {results['load_average_at_end']}")
    console.print(f"written {out.relative_to(ROOT)}")



def recall_table(Table: Any, results: dict[str, Any]) -> Any:
    """One table: LoCoMo held-in / held-out recall per category with the gap and BM25, then the paraphrase set."""
    table = Table(title="make bench-recall: LoCoMo two-fold (tuned on one half, reported on the other, both ways) "
                        "and the paraphrase set, same run")
    for column in ("set", "measure", "n", "held-in", "held-out", "gap", "baseline (same run)"):
        table.add_column(column, justify="left" if column in ("set", "measure") else "right")
    folds = results.get("folds")
    if folds:
        for k in (10, 5):
            for name in [*CATEGORIES.values(), "overall"]:
                held_in, held_out = folds["held_in"][f"recall@{k}"][name], folds["held_out"][f"recall@{k}"][name]
                table.add_row("LoCoMo", f"{name} r@{k}", str(folds["held_out"]["n"][name]), f"{held_in:.3f}",
                              f"{held_out:.3f}", f"{held_in - held_out:+.3f}",
                              f"BM25 {folds['bm25'][f'recall@{k}'][name]:.3f}")
        for d in folds["directions"]:
            held_in, held_out = d["held_in"]["recall@10"]["overall"], d["held_out"]["recall@10"]["overall"]
            table.add_row("LoCoMo", f"chosen on {d['tuned_on']}, r@10 on {d['tuned_on']} / on {d['reported_on']}",
                          str(d["held_out"]["n"]["overall"]), f"{held_in:.3f}", f"{held_out:.3f}",
                          f"{held_in - held_out:+.3f}", d["chosen"])
        if folds.get("not_admissible"):
            table.add_row("LoCoMo", "not chosen: paraphrase set broken", str(len(folds["not_admissible"])), "", "",
                          "", ", ".join(folds["not_admissible"]))
    para = results.get("paraphrase")
    if para:
        ours, alone, n = para["engram"], para["minilm_alone"], para["set"]["questions"]
        for key, label in (("top1", "top-1"), ("top3", "top-3")):
            table.add_row("paraphrase", label, str(n), "", f"{ours[key] / n:.3f} ({ours[key]})", "",
                          f"MiniLM alone {alone[key] / n:.3f} ({alone[key]})")
        table.add_row("paraphrase", "empty answers (answer stored)", str(n), "", str(ours["empty"]), "", "")
        table.add_row("paraphrase", "first packet strong / weak", str(n), "",
                      f"{ours['strong_first']} / {ours['weak_first']}", "", "")
        nm = para["set"]["no_match"]
        table.add_row("paraphrase", "no-match: with a strong packet", str(nm), "", str(ours["no_match_with_strong"]),
                      "", f"empty {ours['no_match_empty']}, packets {ours['no_match_packets']}")
    return table


if __name__ == "__main__":
    main()
