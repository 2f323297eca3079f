"""Backing up and restoring the configured database with pg_dump / pg_restore.

The archive is pg_dump's custom format (compressed, restorable table by table). It holds everything the
service promises to keep: records, candidates, procedure versions, thread events, checkpoints, tombstones,
deletion jobs and the derived data (embeddings, context windows, full-text vectors, and every index,
the per-subject ones included). Only the two cache tables' rows are left out: they are disposable.

Which binaries: ``ENGRAM_PG_BIN`` when set; for the embedded server, the ones shipped in the pgserver
package (the same major version as the server); for a DATABASE_URL, the pg_dump on PATH when it is at least
the server's major version (pg_dump refuses an older one), else pgserver's.

Restoring replaces the database's ``public`` schema with the archive's, then ``manage.py restore`` migrates,
re-applies the deletion journal (memory/deletion/journal.py) and queues the derived-data sweeps.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

# Disposable rows: cached results and worker heartbeats are rebuilt on their own.
EXCLUDED_TABLE_DATA = ("engram_cache", "engram_coordination")


class BackupError(Exception):
    pass


@dataclass(frozen=True)
class Target:
    """libpq's view of the configured database, as environment variables for the pg tools."""

    dbname: str
    env: dict[str, str]


def target() -> Target:
    """The database Django is configured for (under pytest-django, the test database)."""
    s = connection.settings_dict
    env = {"PGDATABASE": s["NAME"], "PGUSER": s.get("USER") or "", "PGHOST": s.get("HOST") or "",
           "PGPORT": str(s.get("PORT") or "")}
    if s.get("PASSWORD"):
        env["PGPASSWORD"] = s["PASSWORD"]
    options = s.get("OPTIONS") or {}
    if options.get("sslmode"):
        env["PGSSLMODE"] = str(options["sslmode"])
    return Target(dbname=s["NAME"], env={k: v for k, v in env.items() if v})


def _server_major() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        return int(cursor.fetchone()[0]) // 10000


def _tool_major(path: str) -> int:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"(\d+)(?:\.\d+)?", out.split(")")[-1])
    return int(match.group(1)) if match else 0


def _pgserver_bin() -> Path | None:
    try:
        import pgserver
    except ImportError:
        return None
    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def tool(name: str) -> str:
    """The path of pg_dump / pg_restore to use (see the module docstring)."""
    if os.environ.get("ENGRAM_PG_BIN"):
        return str(Path(os.environ["ENGRAM_PG_BIN"]) / name)
    embedded = not getattr(settings, "DATABASE_URL", "")
    bundled = _pgserver_bin()
    on_path = shutil.which(name)
    if not embedded and on_path and _tool_major(on_path) >= _server_major():
        return on_path
    if bundled is not None and (bundled / name).exists():
        return str(bundled / name)
    if on_path:
        return on_path
    raise BackupError(f"no {name} found: install the PostgreSQL client tools or set ENGRAM_PG_BIN")


def _run(command: list[str], *, env: dict[str, str], on_line: Callable[[str], None]) -> None:
    """Run a pg tool with --verbose; every line of stderr goes to ``on_line`` (the progress)."""
    process = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line.rstrip())
        on_line(line)
    if process.wait() != 0:
        errors = [x for x in lines if "error" in x.lower() or "fatal" in x.lower()] or lines[-5:]
        raise BackupError(f"{Path(command[0]).name} failed: " + " | ".join(errors[-5:]))


def table_count() -> int:
    """Tables whose rows pg_dump writes (the progress total of a backup)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE c.relkind IN ('r', 'p') "
                       "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'")
        return int(cursor.fetchone()[0])


def backup(path: Path, *, advance: Callable[[int], None] = lambda n: None) -> Path:
    """Write the archive to ``path`` (through a temporary name, so a failed run leaves no half file)."""
    t = target()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    command = [tool("pg_dump"), "--format=custom", "--verbose", "--no-owner", "--no-privileges",
               f"--file={partial}"]
    command += [f"--exclude-table-data={name}" for name in EXCLUDED_TABLE_DATA]

    def on_line(line: str) -> None:
        if "dumping contents of table" in line:
            advance(1)

    connection.close()  # the tool opens its own connection; ours must not hold a snapshot open
    _run(command, env=t.env, on_line=on_line)
    partial.replace(path)
    return path


def archive_entries(path: Path) -> int:
    """Items in an archive's table of contents (the progress total of a restore); also proves it is readable."""
    result = subprocess.run([tool("pg_restore"), "--list", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise BackupError(f"{path} is not a readable pg_dump archive: {result.stderr.strip()[:300]}")
    return sum(1 for line in result.stdout.splitlines() if line and not line.startswith(";"))


def other_sessions() -> list[dict[str, Any]]:
    """Other connections to the configured database (a web or worker process still running)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, application_name, client_addr::text, state FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return [dict(zip(("pid", "application", "address", "state"), row, strict=True)) for row in cursor.fetchall()]


def disconnect_others() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])


def restore(path: Path, *, advance: Callable[[int], None] = lambda n: None) -> None:
    """Replace the database's public schema with the archive's.

    The schema is dropped and created empty first, so what the database holds afterwards is exactly the
    archive (a table a newer migration added does not linger and trip the next migrate). pg_restore then
    runs in one transaction and stops at the first error.
    """
    t = target()
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA IF EXISTS public CASCADE")
        cursor.execute("CREATE SCHEMA public")
    connection.close()
    command = [tool("pg_restore"), "--verbose", "--no-owner", "--no-privileges", "--single-transaction",
               "--exit-on-error", f"--dbname={t.dbname}", str(path)]

    def on_line(line: str) -> None:
        if line.startswith("pg_restore: creating") or line.startswith("pg_restore: processing data"):
            advance(1)

    _run(command, env=t.env, on_line=on_line)
