"""The embedded PostgreSQL: one shared server under var/pgdata, with pgvector, used by tests too."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from config.embedded_db import ensure_server


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
