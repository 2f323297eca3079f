"""Start (or attach to) the embedded PostgreSQL + pgvector server used when DATABASE_URL is unset.

The server is a daemon under ``var/pgdata``: every process of the project (web, worker, tests,
management commands) attaches to the same one, and none of them owns its life. It is stopped
explicitly with ``make db-stop``. See STACK_NOTES: we pass ``cleanup_mode=None`` because
pgserver's default 'stop' mode keeps a pid list that a SIGKILLed process (runserver's reloader
child) leaves behind forever.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import time
from pathlib import Path

APP_DB_NAME = "engram"
logger = logging.getLogger("engram.db")

# PostgreSQL's own default (128 MB) holds a few thousand records' rows and graphs. A subject of 100,000 records
# has HNSW graphs of hundreds of MB, and every retrieve walks a different part of them: with 128 MB a retrieve
# copied ~3,400 pages from the OS cache into shared buffers, evicting others, and its memory statement took
# 28.6 ms (p50) against 22.0 ms once they fit (docs/benchmarks.md). PostgreSQL's documentation suggests a
# quarter of the memory for a dedicated server; this one shares the host with the web and worker processes and
# the model, hence the ceiling.
SHARED_BUFFERS_CEILING_MB = 1024
SHARED_BUFFERS_FLOOR_MB = 128


def _runtime_dir(base_dir: Path) -> Path:
    # pgserver falls back to $XDG_RUNTIME_DIR for its lock file and for the socket when the data
    # dir path is too long for a unix socket (~107 bytes); keep both inside the project.
    path = base_dir / "var" / "run"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)  # platformdirs ignores a runtime dir that others can read
    return path


def ensure_server(base_dir: Path, *, database: str = APP_DB_NAME) -> str:
    """Make sure the embedded server runs, with its settings, and ``database`` exists; return the socket
    directory."""
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
            break
        except Exception as exc:  # noqa: BLE001 - any failure here is "not up yet"
            last_error = exc
            # pgserver caches its handle per process and would hand back the one of a server that has since
            # stopped (a restart, a crash): forget it, so the next attempt starts the server again.
            pgserver.PostgresServer._instances.pop(datadir.resolve(), None)
            time.sleep(0.5)
    else:
        raise RuntimeError(f"embedded PostgreSQL did not come up under {datadir}: {last_error}")
    # One process at a time: of processes starting together, the first restarts the server if it must, and the others
    # find it configured.
    with open(_runtime_dir(base_dir) / "configure.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _configure(socket_dir, datadir)
    return socket_dir


def shared_buffers() -> str:
    """ENGRAM_PG_SHARED_BUFFERS, else a quarter of the memory this host (or its container) has, within
    SHARED_BUFFERS_FLOOR_MB and SHARED_BUFFERS_CEILING_MB."""
    configured = os.environ.get("ENGRAM_PG_SHARED_BUFFERS", "").strip()
    if configured:
        return configured
    quarter = _memory_bytes() // 4 // 2**20
    return f"{max(SHARED_BUFFERS_FLOOR_MB, min(SHARED_BUFFERS_CEILING_MB, quarter))}MB"


def _memory_bytes() -> int:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            value = limit.read_text().strip()
        except OSError:
            continue
        if value.isdigit():
            physical = min(physical, int(value))
    return physical


def _configure(socket_dir: str, datadir: Path) -> None:
    """Give the embedded server its settings (``ALTER SYSTEM``: postgresql.auto.conf in its data directory).
    shared_buffers takes effect at a start: the server is restarted at once when nobody else is connected (its
    first start, or ``make run`` after ``make db-stop``); otherwise the change waits for the next restart, and is
    logged, so that no other process loses its connections."""
    import psycopg

    wanted = shared_buffers()
    settings_file = datadir / "postgresql.auto.conf"
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True,
                         connect_timeout=5) as conn:
        try:
            same = conn.execute("SELECT pg_size_bytes(%s) = pg_size_bytes(current_setting('shared_buffers'))",
                                [wanted]).fetchone()
            if same is not None and same[0]:
                return
            former = settings_file.read_text()
            # ALTER SYSTEM takes no parameters: the value goes in as the server itself quotes it.
            quoted = conn.execute("SELECT quote_literal(%s)", [wanted]).fetchone()
            assert quoted is not None
            conn.execute(f"ALTER SYSTEM SET shared_buffers = {quoted[0]}")
            conn.execute("SELECT pg_reload_conf()")  # pg_settings.pending_restart says it waits for a restart
        except psycopg.Error as exc:
            raise RuntimeError(f"ENGRAM_PG_SHARED_BUFFERS={wanted!r} is not a size PostgreSQL accepts "
                               "(e.g. 512MB)") from exc
        others = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                              "AND pid <> pg_backend_pid()").fetchone()
    if others and others[0]:
        logger.warning("the embedded PostgreSQL runs with other shared_buffers than %s; the change takes effect when "
                       "it restarts (make db-stop, then make run)", wanted)
        return
    if _pg_ctl(datadir, "-m", "fast", "-w", "-l", str(datadir / "log"), "restart", quiet=True) != 0:
        # It did not come back with them (e.g. the host refused that much shared memory): start it as it was, the
        # way pgserver starts it (its socket, its log).
        logger.error("the embedded PostgreSQL did not start with shared_buffers = %s; it runs with its former "
                     "setting (see %s)", wanted, datadir / "log")
        settings_file.write_text(former)
        import pgserver

        pgserver.PostgresServer._instances.pop(datadir.resolve(), None)
        pgserver.get_server(datadir, cleanup_mode=None)


def _pg_ctl(datadir: Path, *args: str, quiet: bool = False) -> int:
    command = [str(pg_ctl_path()), "-D", str(datadir.resolve()), *args]
    if os.geteuid() == 0:  # pgserver runs the server as its own system user when we are root
        command = ["su", "pgserver", "-s", "/bin/sh", "-c", " ".join(command)]
    output = subprocess.DEVNULL if quiet else None
    return subprocess.run(command, check=False, stdout=output, stderr=output, timeout=120).returncode


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
    datadir = (base_dir / "var" / "pgdata").resolve()
    if not (datadir / "postmaster.pid").exists():
        print("embedded PostgreSQL is not running")
        return
    _pg_ctl(datadir, "-m", "fast", "-w", "stop")
