"""CPU of one 500-item ``POST /api/v1/memories/batch`` in this process: the web side of an import.

    .venv/bin/python bench/batch_cpu.py              # 8 calls after a warm-up, prints min / median
    .venv/bin/python bench/batch_cpu.py --calls 20

The same items as ``bench/import_load.py`` (one subject, new event ids each call), through Django's test
client: request parsing, validation, the write gate, COPY, commit and rendering the answer. CPU time is this
process's only (PostgreSQL's work shows in the wall time), so it is far less noisy than a rate when other work
shares the cores; the load average is printed beside it all the same.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from harness import credentials, headers, load_average, use_database


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=8)
    p.add_argument("--database", default="engram_bench_batch_cpu")
    args = p.parse_args()

    use_database(args.database)
    from import_load import items
    from rest_framework.test import APIClient

    creds = credentials("bench", ["usr_batch"])
    client = APIClient()
    auth = headers(creds, "usr_batch")
    rng = random.Random(1)
    base = time.time_ns()  # new event ids on every run against the same database

    def call(n: int) -> None:
        response = client.post("/api/v1/memories/batch", {"items": items(rng, n * 500, 500, f"cpu{base}")},
                               format="json", HTTP_AUTHORIZATION=auth["Authorization"],
                               HTTP_X_ENGRAM_PRINCIPAL=auth["X-Engram-Principal"])
        assert response.status_code == 200, response.content[:300]

    call(0)  # warm-up: imports, the model classes, the first connection
    cpu, wall = [], []
    for n in range(1, args.calls + 1):
        started, started_cpu = time.perf_counter(), time.process_time()
        call(n)
        cpu.append(time.process_time() - started_cpu)
        wall.append(time.perf_counter() - started)
    print(f"one 500-item batch: CPU min {min(cpu) * 1000:.0f} ms, median {statistics.median(cpu) * 1000:.0f} ms; "
          f"wall min {min(wall) * 1000:.0f} ms, median {statistics.median(wall) * 1000:.0f} ms; "
          f"load average {load_average()}")


if __name__ == "__main__":
    main()
