"""What the load benchmarks share: a fresh database, `manage.py serve` on it (the set-up `make run` starts:
gunicorn plus a worker per queue), credentials made through the services, HTTP calls, percentiles, and
where results go. Every benchmark runs on its own database of the embedded server (or of DATABASE_URL's
server), never the app database."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


_ASKED = itertools.count()


def asked_once(question: str) -> str:
    """``question`` made unique in this run: each web process keeps the vectors of the questions it has embedded
    (memory/embedder.py), so a question asked again would skip the embedding every retrieve otherwise pays."""
    return f"{question} ({next(_ASKED)})"

def use_database(name: str) -> None:
    """Drop and create ``name``, point this process (and the servers it starts) at it, set Django up and
    migrate. Must run before anything imports Django settings."""
    import psycopg

    os.environ["ENGRAM_DB_NAME"] = name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    url = os.environ.get("DATABASE_URL")
    if url:
        import dj_database_url

        cfg = dj_database_url.parse(url)
        admin = {"host": cfg["HOST"], "port": cfg.get("PORT") or 5432, "user": cfg["USER"],
                 "password": cfg.get("PASSWORD") or None, "dbname": "postgres"}
    else:
        from config.embedded_db import ensure_server

        admin = {"host": ensure_server(ROOT), "user": "postgres", "dbname": "postgres"}
    with psycopg.connect(autocommit=True, **{k: v for k, v in admin.items() if v is not None}) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    if url:  # the servers this process starts must reach the new database too
        os.environ["DATABASE_URL"] = url.rsplit("/", 1)[0] + "/" + name
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def credentials(tenant_slug: str, subjects: list[str]) -> dict[str, Any]:
    """A tenant with the default classes, an agent key and a principal token per subject."""
    from memory.identity.services import agent_key_create, principal_token_mint, tenant_create

    tenant = tenant_create(slug=tenant_slug)
    _, key = agent_key_create(tenant=tenant, name="bench", permissions=["read", "write", "propose", "mint"])
    tokens = {s: principal_token_mint(tenant=tenant, subject_external_id=s, ttl=6 * 3600)[0] for s in subjects}
    return {"tenant": tenant, "key": key, "tokens": tokens}


def headers(creds: dict[str, Any], subject: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {creds['key']}", "X-Engram-Principal": creds["tokens"][subject]}


class Client:
    """One keep-alive HTTP connection (what a client library holds)."""

    def __init__(self, port: int, timeout: float = 300.0) -> None:
        self.port, self.timeout = port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, hdrs: dict[str, str], body: Any = None) -> tuple[int, Any, float]:
        data = json.dumps(body).encode() if body is not None else None
        sent = {**hdrs, "Content-Type": "application/json"} if data is not None else hdrs
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            started = time.perf_counter()
            try:
                self.conn.request(method, path, body=data, headers=sent)
                response = self.conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt == 2:
                    raise
                continue  # the server closed an idle keep-alive connection: reconnect once
            except (OSError, http.client.HTTPException):
                self.close()
                raise
            elapsed = (time.perf_counter() - started) * 1000.0
            try:
                parsed = json.loads(payload) if payload else None
            except ValueError:
                parsed = payload.decode(errors="replace")
            return response.status, parsed, elapsed
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def start_serve(port: int, extra_env: dict[str, str] | None = None, args: list[str] | None = None
                ) -> subprocess.Popen[bytes]:
    """`manage.py serve` on this process's database, as `make run` starts it; returns once health is ok."""
    env = {**os.environ, "ENGRAM_LOG_LEVEL": "WARNING", **(extra_env or {})}
    log = open(ROOT / "var" / f"bench-serve-{port}.log", "wb")  # noqa: SIM115 - kept open for the child
    server = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port), *(args or [])],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    client = Client(port, timeout=5)
    for _ in range(600):
        try:
            status, body, _ = client.call("GET", "/api/v1/health", {})
            if status == 200 and body.get("worker") == "ok":
                return server
        except OSError:
            pass
        if server.poll() is not None:
            raise RuntimeError(f"serve exited with {server.returncode}; see var/bench-serve-{port}.log")
        time.sleep(0.3)
    raise RuntimeError("serve did not become healthy")


def stop(process: subprocess.Popen[bytes]) -> None:
    import signal

    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def embedder_rate(texts: list[str], processes: int = 1) -> tuple[float, str]:
    """The embedder's own batch rate on ``texts`` (batch 64), and its runtime: the baseline an ingest's end-to-end
    rate is divided by. One process uses every core; with ``processes``, that many processes (spawned, the model
    loaded before the clock starts) each embed an equal share with an equal share of the cores, at once, and the
    rate is every text over the time until the last one finished: the two ways the bulk workers can be set up."""
    cores = os.cpu_count() or 1
    if processes > 1:
        return _rate_across_processes(texts, processes, max(1, cores // processes))
    embedder, runtime = _loaded_embedder(texts, cores)
    t0 = time.perf_counter()
    embedder.embed(texts, batch_size=64)
    return len(texts) / (time.perf_counter() - t0), runtime


def embedder_rates(texts: list[str]) -> list[tuple[float, str]]:
    """The embedder's own batch rate on ``texts`` as one process on every core, and (on more than one core) as one
    single-threaded process per core, the bulk workers with ENGRAM_Q_BULK_WORKERS set to the cores: an ingest is
    divided by the higher, so that the set-up of the workers can never raise its ratio."""
    cores = os.cpu_count() or 1
    return [embedder_rate(texts)] + ([embedder_rate(texts, processes=cores)] if cores > 1 else [])


def _loaded_embedder(texts: list[str], threads: int) -> tuple[Any, str]:
    """This process's embedder with ``threads`` model threads, its batch path warmed on ``texts``; and its runtime."""
    from memory.workqueues import thread_env

    os.environ.update(thread_env(threads))
    from memory.embedder import get_embedder

    embedder = get_embedder()
    embedder.embed(texts[:64])
    runtime = getattr(getattr(embedder, "runtime", None), "runtime", "?")
    if runtime == "torch":
        import torch

        torch.set_num_threads(threads)
    return embedder, runtime


def _embed_share(texts: list[str], threads: int, ready: Any, go: Any, done: Any) -> None:
    import django

    django.setup()
    embedder, runtime = _loaded_embedder(texts, threads)
    ready.put(runtime)
    go.wait()
    embedder.embed(texts, batch_size=64)
    done.put(len(texts))


def _rate_across_processes(texts: list[str], processes: int, threads: int) -> tuple[float, str]:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    ready, done, go = context.Queue(), context.Queue(), context.Event()
    workers = [context.Process(target=_embed_share, args=(texts[n::processes], threads, ready, go, done))
               for n in range(processes)]
    for worker in workers:
        worker.start()
    runtimes = {ready.get(timeout=300) for _ in workers}
    t0 = time.perf_counter()
    go.set()
    embedded = sum(done.get(timeout=3600) for _ in workers)
    seconds = time.perf_counter() - t0
    for worker in workers:
        worker.join()
    return embedded / seconds, "/".join(sorted(runtimes))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MiB."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def write_results(name: str, results: dict[str, Any]) -> Path:
    out = ROOT / "bench" / "results" / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results["command"] = f"bench/{name}.py " + " ".join(sys.argv[1:])
    results["load_average_at_end"] = load_average()
    results["cpus"] = os.cpu_count()
    out.write_text(json.dumps(results, indent=2, default=str))
    return out
