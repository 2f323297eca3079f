"""A PostgreSQL + pgvector server of its own, listening on a loopback TCP port, for tests that need several
nodes to reach one database by DATABASE_URL (as they would a managed PostgreSQL).

Built from the binaries pgserver ships (initdb, pg_ctl, postgres 16 with pgvector); run as the ``pgserver``
system user when we are root, as pgserver itself does. The data directory lives under var/ and is removed
when the server stops.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent.parent


def _bin(name: str) -> str:
    import pgserver

    return str(Path(pgserver.__file__).parent / "pginstall" / "bin" / name)


def _run_as_server_user(command: list[str]) -> None:
    if os.geteuid() == 0:
        command = ["su", "pgserver", "-s", "/bin/sh", "-c", " ".join(f"'{c}'" for c in command)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)


@contextmanager
def tcp_postgres(port: int, database: str = "engram") -> Iterator[str]:
    """Start a fresh server on 127.0.0.1:``port`` with an empty ``database``; yield its DATABASE_URL."""
    from config.embedded_db import ensure_server

    ensure_server(ROOT)  # makes sure the pgserver user exists and var/'s parents are readable to it
    datadir = ROOT / "var" / f"tcp-postgres-{port}"
    shutil.rmtree(datadir, ignore_errors=True)
    datadir.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(datadir, "pgserver", "pgserver")
    _run_as_server_user([_bin("initdb"), "-D", str(datadir), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {datadir} -c max_connections=200"
    _run_as_server_user([_bin("pg_ctl"), "-D", str(datadir), "-o", options, "-l", str(datadir / "log"), "-w",
                         "start"])
    try:
        for _ in range(50):
            try:
                with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                                     autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{database}"')
                break
            except psycopg.OperationalError:
                time.sleep(0.2)
        yield f"postgres://postgres@127.0.0.1:{port}/{database}"
    finally:
        _run_as_server_user([_bin("pg_ctl"), "-D", str(datadir), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(datadir, ignore_errors=True)
