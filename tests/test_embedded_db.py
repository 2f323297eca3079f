"""The embedded PostgreSQL: one shared server under var/pgdata, with pgvector, used by tests too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from config.embedded_db import (
    SHARED_BUFFERS_CEILING_MB,
    SHARED_BUFFERS_FLOOR_MB,
    ensure_server,
    shared_buffers,
    stop_server,
)


@pytest.mark.skipif(bool(settings.DATABASE_URL), reason="DATABASE_URL points at an external server")
def test_attaching_again_reuses_the_running_server():
    assert ensure_server(settings.BASE_DIR) == settings.DATABASES["default"]["HOST"]


@pytest.mark.django_db
def test_the_test_database_lives_on_the_same_server_and_has_pgvector():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0].startswith("test_")
    assert connection.settings_dict["HOST"] == settings.DATABASES["default"]["HOST"]


@pytest.mark.skipif(bool(settings.DATABASE_URL), reason="DATABASE_URL points at an external server")
def test_another_process_attaches_to_the_same_server():
    code = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings'); django.setup();"
            "from django.db import connection; c = connection.cursor(); c.execute('SELECT inet_server_port()');"
            "print(connection.settings_dict['HOST'])")
    out = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, capture_output=True, text=True,
                         timeout=60, check=True)

    assert out.stdout.strip().splitlines()[-1] == settings.DATABASES["default"]["HOST"]


@pytest.fixture
def own_server_dir(monkeypatch):
    """A directory for an embedded server of this test's own (var/'s parents are readable to pgserver's user)."""
    base = settings.BASE_DIR / "var" / f"embedded-test-{uuid.uuid4().hex[:8]}"
    base.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(base, "pgserver", "pgserver")
    yield base
    stop_server(base)
    shutil.rmtree(base, ignore_errors=True)


def _shared_buffers(socket_dir: str) -> tuple[str, str]:
    """What the server runs with, and what its configuration files say."""
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('shared_buffers'), (SELECT setting FROM pg_file_settings "
                           "WHERE name = 'shared_buffers' ORDER BY seqno DESC LIMIT 1)").fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.mark.skipif(bool(settings.DATABASE_URL), reason="DATABASE_URL points at an external server")
def test_the_server_runs_with_the_configured_shared_buffers_and_never_restarts_under_a_connected_client(
        own_server_dir, monkeypatch):
    monkeypatch.setenv("ENGRAM_PG_SHARED_BUFFERS", "160MB")
    socket_dir = ensure_server(own_server_dir)
    assert _shared_buffers(socket_dir) == ("160MB", "160MB")  # restarted at its first start: nobody else was there

    monkeypatch.setenv("ENGRAM_PG_SHARED_BUFFERS", "176MB")
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as other:
        assert ensure_server(own_server_dir) == socket_dir
        assert _shared_buffers(socket_dir) == ("160MB", "176MB")  # written, waiting for a restart
        assert other.execute("SELECT 1").fetchone() == (1,)  # the connected client kept its connection

    ensure_server(own_server_dir)  # alone again: applied now
    assert _shared_buffers(socket_dir) == ("176MB", "176MB")

    monkeypatch.setenv("ENGRAM_PG_SHARED_BUFFERS", "plenty")
    with pytest.raises(RuntimeError, match="ENGRAM_PG_SHARED_BUFFERS='plenty' is not a size"):
        ensure_server(own_server_dir)
    assert _shared_buffers(socket_dir) == ("176MB", "176MB")  # nothing written

    # A size PostgreSQL accepts but the host cannot give: the server comes back as it was, on the same socket.
    monkeypatch.setenv("ENGRAM_PG_SHARED_BUFFERS", "4TB")
    assert ensure_server(own_server_dir) == socket_dir
    assert _shared_buffers(socket_dir) == ("176MB", "176MB")


def test_shared_buffers_default_to_a_quarter_of_memory_within_bounds(monkeypatch):
    monkeypatch.delenv("ENGRAM_PG_SHARED_BUFFERS", raising=False)
    quarter = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4 // 2**20
    megabytes = int(shared_buffers().removesuffix("MB"))
    assert SHARED_BUFFERS_FLOOR_MB <= megabytes <= SHARED_BUFFERS_CEILING_MB
    assert megabytes <= max(quarter, SHARED_BUFFERS_FLOOR_MB)
