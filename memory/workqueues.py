"""Running the workers: one django-q2 cluster per queue, each process given the CPU share its work needs.

``manage.py workers`` (and ``manage.py serve``, beside the web server) starts one ``qcluster`` per queue of
``memory.queues.QUEUES``. On a machine of its own, one queue is ``Q_CLUSTER_NAME=urgent manage.py qcluster``;
the per-process settings below are applied when each worker process starts, however it was launched.

Why per queue: the embedding model can run multi-threaded (ONNX Runtime, or torch), and processes whose threads
add up to more than the cores only slow each other down. So the bulk workers share the cores between them
(ENGRAM_BULK_EMBED_THREADS each: one per process when there is a worker per core) at a lower CPU priority (web
requests and deletions come first), and every other process — the urgent and interactive workers, each web
worker — gets one thread (ENGRAM_EMBED_THREADS, OMP_NUM_THREADS, set per process).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from memory.embedder import get_embedder
from memory.queues import BULK, QUEUES

logger = logging.getLogger("engram.workers")
BASE_DIR = Path(__file__).resolve().parent.parent


def embed_threads(queue: str) -> int:
    return max(1, settings.ENGRAM_BULK_EMBED_THREADS) if queue == BULK else 1


def thread_env(threads: int) -> dict[str, str]:
    """Read by the ONNX embedder's batch session, torch, OpenMP and BLAS when they load: set before the process
    imports any of them."""
    return {"ENGRAM_EMBED_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "TOKENIZERS_PARALLELISM": "false"}


def malloc_env() -> dict[str, str]:
    """Large allocations (the model's weights among them) on transparent huge pages: one TLB entry per 2 MB
    instead of per 4 kB. A query embedding reads every weight once, usually after the request's other work
    has pushed them out of the caches; with huge pages it measured ~15% faster (in process, 15 ms idle
    between queries: p50 ~4.1 -> ~3.5 ms; vectors unchanged). glibc reads this when the process starts, so
    it is set in the environment of the processes ``serve`` and ``workers`` start. Kernels that never give
    huge pages ignore it."""
    tunables = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t]
    if not settings.ENGRAM_HUGE_PAGES or any(t.startswith("glibc.malloc.hugetlb=") for t in tunables):
        return {}  # off, or the operator's own choice stands
    return {"GLIBC_TUNABLES": ":".join([*tunables, "glibc.malloc.hugetlb=1"])}


def on_worker_spawn(sender: Any, proc_name: str = "", **kwargs: Any) -> None:
    """django-q2's post_spawn: runs in each worker process before it takes its first task."""
    from django_q.conf import Conf

    queue = Conf.CLUSTER_NAME
    if queue == BULK and settings.ENGRAM_Q_BULK_NICE > 0:
        os.nice(settings.ENGRAM_Q_BULK_NICE)
    threads = embed_threads(queue)
    os.environ.update(thread_env(threads))
    warm_up(f"worker {proc_name} ({queue})", threads, batches=True)


def warm_up(who: str, threads: int, *, batches: bool = False, queries: bool = False) -> None:
    """Load the model (and its tokenizer) now, before the first task or request: the first deletion's
    verification or the first retrieve would otherwise pay the model's load (~8 s when it is torch).
    ``batches`` also prepares the multi-threaded path a worker embeds batches with, ``queries`` the query
    graph a web process embeds retrieve queries with."""
    if not settings.ENGRAM_WARMUP:
        return
    try:
        embedder = get_embedder()
        embedder.embed(["warm up"])
        if batches:
            embedder.embed(["warm up", "batches too"])
        if queries:
            embedder.embed_query("warm up")
        embedder.count_tokens("warm up")
        if getattr(getattr(embedder, "runtime", None), "runtime", "") == "torch":
            import torch

            torch.set_num_threads(threads)
    except Exception:  # noqa: BLE001 - without its model a process still answers (lexical retrieval)
        logger.warning("%s could not load the embedding model", who, exc_info=True)


def metrics_dir(port: int) -> Path:
    """The directory every web and worker process ``serve`` starts writes its metrics to (prometheus_client's
    multiprocess mode; the web process answering ``/metrics`` adds them up). Values left by an earlier run
    would be added to this run's, so its files are removed first. PROMETHEUS_MULTIPROC_DIR, when set, names
    it (shared with ``manage.py workers`` on the same host); otherwise it is under var/, one per port."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    directory = Path(configured) if configured else BASE_DIR / "var" / "metrics" / str(port)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink(missing_ok=True)
    return directory


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None


def worker_children(queues: tuple[str, ...] = QUEUES) -> list[Child]:
    return [Child(name=f"worker:{queue}", argv=[sys.executable, "manage.py", "qcluster"],
                  env={"Q_CLUSTER_NAME": queue, **thread_env(embed_threads(queue)), **malloc_env()})
            for queue in queues]


class Supervisor:
    """Starts children each in its own process group (a terminal's Ctrl-C reaches only this process) and
    stops them all when any of them dies or this process is asked to stop (a UI without its workers would
    hide failures). Each child's main process gets one SIGTERM and stops its own children (qcluster stops
    its sentinel, pusher and workers; gunicorn its workers); a group still alive after the grace period
    is killed whole."""

    GRACE_SECONDS = 20.0

    def __init__(self, children: list[Child]) -> None:
        self.children = children
        self.stopping = False

    def start(self) -> None:
        for child in self.children:
            child.process = subprocess.Popen(child.argv, cwd=BASE_DIR, env={**os.environ, **child.env},
                                             start_new_session=True)

    def stop(self, *_: Any) -> None:
        if self.stopping:
            return
        self.stopping = True
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)

    def run(self) -> None:
        signal.signal(signal.SIGINT, self.stop)
        signal.signal(signal.SIGTERM, self.stop)
        self.start()
        try:
            while not self.stopping and all(c.process is not None and c.process.poll() is None
                                            for c in self.children):
                time.sleep(0.5)
        finally:
            self.stop()
            deadline = time.monotonic() + self.GRACE_SECONDS
            for child in self.children:
                if child.process is None:
                    continue
                try:
                    child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                try:
                    os.killpg(child.process.pid, signal.SIGKILL)  # whatever the group still holds
                except ProcessLookupError:
                    pass
                child.process.wait()
