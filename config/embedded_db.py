"""Start (or attach to) the embedded PostgreSQL + pgvector server used when DATABASE_URL is unset.

The server is a daemon under ``var/pgdata``: every process of the project (web, worker, tests,
management commands) attaches to the same one, and none of them owns its life. It is stopped
explicitly with ``make db-stop``. See STACK_NOTES: we pass ``cleanup_mode=None`` because
pgserver's default 'stop' mode keeps a pid list that a SIGKILLed process (runserver's reloader
child) leaves behind forever.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

APP_DB_NAME = "engram"


def _runtime_dir(base_dir: Path) -> Path:
    # pgserver falls back to $XDG_RUNTIME_DIR for its lock file and for the socket when the data
    # dir path is too long for a unix socket (~107 bytes); keep both inside the project.
    path = base_dir / "var" / "run"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)  # platformdirs ignores a runtime dir that others can read
    return path


def ensure_server(base_dir: Path, *, database: str = APP_DB_NAME) -> str:
    """Make sure the embedded server runs and ``database`` exists; return the socket directory."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(_runtime_dir(base_dir)))
    datadir = base_dir / "var" / "pgdata"
    datadir.mkdir(parents=True, exist_ok=True)

    import pgserver  # imported lazily: only the embedded mode needs it

    last_error: Exception | None = None
    # After a crash a zombie postmaster can look alive for a few seconds and hand back a dead
    # socket (STACK_NOTES); retry attach + connect until the recovery has happened.
    for _attempt in range(20):
        try:
            server = pgserver.get_server(datadir, cleanup_mode=None)
            socket_dir = str(server.get_postmaster_info().socket_dir or datadir)
            _ensure_database(socket_dir, database)
            return socket_dir
        except Exception as exc:  # noqa: BLE001 - any failure here is "not up yet"
            last_error = exc
            # pgserver caches its handle per process and would hand back the one of a server that has since
            # stopped (a restart, a crash): forget it, so the next attempt starts the server again.
            pgserver.PostgresServer._instances.pop(datadir.resolve(), None)
            time.sleep(0.5)
    raise RuntimeError(f"embedded PostgreSQL did not come up under {datadir}: {last_error}")


def _ensure_database(socket_dir: str, database: str) -> None:
    import psycopg

    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True,
                         connect_timeout=5) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            try:
                conn.execute(f'CREATE DATABASE "{database}"')
            except psycopg.errors.DuplicateDatabase:
                pass  # another process created it between our check and our CREATE


def pg_ctl_path() -> Path:
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"


def stop_server(base_dir: Path) -> None:
    """Stop the embedded server (it otherwise outlives every process that used it)."""
    import subprocess

    datadir = (base_dir / "var" / "pgdata").resolve()
    if not (datadir / "postmaster.pid").exists():
        print("embedded PostgreSQL is not running")
        return
    command = [str(pg_ctl_path()), "-D", str(datadir), "-m", "fast", "-w", "stop"]
    if os.geteuid() == 0:  # pgserver runs the server as its own system user when we are root
        command = ["su", "pgserver", "-s", "/bin/sh", "-c", " ".join(command)]
    subprocess.run(command, check=False)
