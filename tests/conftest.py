"""Shared fixtures: two tenants, an owner and an outsider subject, agent keys in and out of scope.

Everything is created through the services, as a client would, on the real embedded Postgres.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings
    from django.test import TransactionTestCase

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    TransactionTestCase._fixture_teardown = _empty_written_tables  # type: ignore[method-assign]


# --- Emptying the database after a transactional test -----------------------------------------------
# Django empties the database after every transactional test (TransactionTestCase: pytest-django's
# transactional_db and live_server) with one TRUNCATE of every table, then writes the content types and
# permissions again through post_migrate. On the embedded server that costs 0.2-0.5 s a test: a TRUNCATE
# gives each of ~50 tables and their indexes new files, flushed to disk at commit. A test leaves rows in a
# dozen tables at most; deleting those rows (in one transaction whose foreign keys are checked at its end, as
# Django declares them deferrable) leaves the same empty database in a few milliseconds. The content types
# and permissions are what post_migrate would write again, so they are kept rather than rewritten.
KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})


def _empty_written_tables(self: Any) -> None:
    from django.db import connections, transaction

    for alias in self._databases_names(include_mirrors=False):
        connection = connections[alias]
        quote = connection.ops.quote_name
        tables = [t for t in connection.introspection.django_table_names(only_existing=True, include_views=False)
                  if t not in KEPT_TABLES]
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join(f"SELECT %s WHERE EXISTS (SELECT FROM {quote(t)})" for t in tables),
                           tables)
            written = [row[0] for row in cursor.fetchall()]
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            for table in written:
                cursor.execute(f"DELETE FROM {quote(table)}")


# A test that starts a browser or a worker process costs seconds; most others cost a fraction of one.
SLOW_MARKERS = ("browser", "worker")
SLOW_TEST_WEIGHT = 10


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the most expensive files first. `make test` hands whole files to two processes in collection order
    (`--dist loadfile --no-loadscope-reorder`); with the few-test browser and worker files last, as xdist's own
    order by test count puts them, one process ran the final long file while the other sat idle."""
    cost: dict[Path, int] = {}
    for item in items:
        slow = any(item.get_closest_marker(name) for name in SLOW_MARKERS)
        cost[item.path] = cost.get(item.path, 0) + (SLOW_TEST_WEIGHT if slow else 1)
    items.sort(key=lambda item: (-cost[item.path], str(item.path)))  # stable: a file keeps its own order


@dataclass
class Agent:
    """An API client bound to one agent key and (optionally) one principal token."""

    client: APIClient
    key: str
    token: str | None
    tenant: Any
    subject: Any

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {self.key}"}
        if self.token:
            headers["HTTP_X_ENGRAM_PRINCIPAL"] = self.token
        for name, value in (extra or {}).items():
            headers["HTTP_" + name.upper().replace("-", "_")] = value
        return headers

    def get(self, path: str, params: dict | None = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.get(path, params or {}, **self._headers(headers))

    def post(self, path: str, data: Any = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.post(path, data, format="json", **self._headers(headers))

    def put(self, path: str, data: Any = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.put(path, data, format="json", **self._headers(headers))

    def patch(self, path: str, data: Any = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.patch(path, data, format="json", **self._headers(headers))

    def delete(self, path: str, headers: dict[str, str] | None = None) -> Any:
        return self.client.delete(path, **self._headers(headers))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """pytest-django's test databases, and before they are dropped, every connection this process still holds.

    Django closes the connection it set the database up with before it drops it, but it keeps one connection per
    thread and per context. In some runs the last test's session was still open when the database was dropped while
    the main thread's connection was closed: DROP DATABASE waited 5 s for it and failed with "is being accessed by
    other users", leaving the database behind. So every connection object of this process is closed first."""
    import gc

    from django.db.backends.base.base import BaseDatabaseWrapper

    yield
    with django_db_blocker.unblock():
        # By type, not isinstance: isinstance asks some objects for their __class__ (a weak proxy whose object is
        # gone raises, a deprecated module attribute warns).
        for wrapper in [o for o in gc.get_objects() if issubclass(type(o), BaseDatabaseWrapper)]:
            if wrapper.connection is not None:
                wrapper.inc_thread_sharing()  # it may have been opened by a thread that is gone
                wrapper.close()


@pytest.fixture
def make_tenant(db: Any) -> Any:
    from memory.identity.services import tenant_create

    def make(slug: str = "acme") -> Any:
        return tenant_create(slug=slug)

    return make


@pytest.fixture
def tenant(make_tenant: Any) -> Any:
    return make_tenant("acme")


@pytest.fixture
def other_tenant(make_tenant: Any) -> Any:
    return make_tenant("globex")


@pytest.fixture
def make_agent(db: Any) -> Any:
    """make_agent(tenant, subject="usr_1", scopes=[...], namespaces=None, token_namespaces=None)."""
    from memory.identity.services import agent_key_create, principal_token_mint

    def make(tenant: Any, subject: str | None = "usr_owner", scopes: list[str] | None = None,
             namespaces: list[str] | None = None, token_namespaces: list[str] | None = None) -> Agent:
        _, raw = agent_key_create(tenant=tenant, name=f"key-{subject}",
                                  permissions=scopes or ["read", "write", "propose"], namespaces=namespaces)
        token, subject_row = None, None
        if subject:
            token, subject_row, _ = principal_token_mint(tenant=tenant, subject_external_id=subject,
                                                         namespaces=token_namespaces)
        return Agent(client=APIClient(), key=raw, token=token, tenant=tenant, subject=subject_row)

    return make


@pytest.fixture
def agent(make_agent: Any, tenant: Any) -> Agent:
    """The owner's agent: tenant acme, subject usr_owner, scopes read/write/propose."""
    return make_agent(tenant, "usr_owner")


@pytest.fixture
def outsider(make_agent: Any, tenant: Any) -> Agent:
    """Another subject of the same tenant."""
    return make_agent(tenant, "usr_outsider")


@pytest.fixture
def foreign_agent(make_agent: Any, other_tenant: Any) -> Agent:
    """A subject with the same external id, in another tenant."""
    return make_agent(other_tenant, "usr_owner")


@pytest.fixture
def vault(tenant: Any) -> Any:
    """A class agents may write that requires encryption at rest (and is not embedded)."""
    from memory.models import MemoryClass

    return MemoryClass.objects.create(
        tenant=tenant, name="medical", namespace_prefix="user/medical", allowed_readers=["owner", "agent"],
        model_permission="write", sensitivity="sensitive", encryption_required=True, embed=False)


def memory_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "namespace": ["user", "travel_preferences"],
        "kind": "preference",
        "fact": {"field": "seat_preference", "value": "aisle"},
        "text": "Prefers aisle seats",
        "source": {"type": "explicit_user_statement", "event_id": "evt_seat_1",
                   "text": "I always take the aisle seat."},
    }
    body.update(overrides)
    return body


# --- Browser tests (Playwright driving Debian's Chromium) -----------------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def browser() -> Any:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


AXE = Path(__file__).resolve().parent.parent / "var" / "node" / "node_modules" / "axe-core" / "axe.min.js"
# Violations at these impacts fail a page; "minor" and "moderate" ones are reported by axe but not failed.
AXE_FAILING = ("serious", "critical")


def axe_violations(page: Any) -> list[str]:
    """Run axe-core (WCAG 2.x A/AA rules and best practices) on the page; one line per serious or
    critical violation, naming the rule and the first offending elements."""
    if not AXE.exists():
        pytest.fail(f"axe-core is missing at {AXE}: run `make install` (npm install --prefix var/node axe-core)")
    page.add_script_tag(path=str(AXE))
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [f"{page.url}: {v['impact']} {v['id']} ({v['help']}): "
            + "; ".join(" ".join(node["target"]) for node in v["nodes"][:3])
            for v in results["violations"] if v["impact"] in AXE_FAILING]


# The screenshots the docs show are taken by the browser tests. They are written into docs/screenshots only when
# asked (`make screenshots`): Chromium renders a few bytes differently on every run, and running the suite must
# leave a checkout as it found it.
DOCS_SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def save_screenshot(page: Any, name: str, *, full_page: bool = False) -> Path:
    """Save the page as docs/screenshots/<name> under ENGRAM_SCREENSHOTS=1, else in a temporary directory."""
    folder = DOCS_SCREENSHOTS if os.environ.get("ENGRAM_SCREENSHOTS") == "1" else (
        Path(tempfile.gettempdir()) / "engram-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), full_page=full_page)
    return path


def login(page: Any, base_url: str, username: str, password: str) -> None:
    """Log in through the real login form."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation():  # a click does not wait for the page it leads to
        page.click("button[type=submit]")


# --- A real django-q2 worker ----------------------------------------------------------------------
@pytest.fixture
def qcluster(transactional_db: Any) -> Any:
    """Start `manage.py workers` (a qcluster per queue) against the test database; stopped (before the flush)
    after the test. Models load on first use (no warm-up): most worker tests never embed."""
    import subprocess
    import sys
    from pathlib import Path

    from django.db import connection

    from memory.workqueues import Supervisor

    # Warnings only: nothing reads the pipe, and a worker blocks once it is full (each task logs two lines).
    env = {**os.environ, "ENGRAM_DB_NAME": connection.settings_dict["NAME"], "ENGRAM_Q_WORKERS": "1",
           "ENGRAM_WARMUP": "0", "ENGRAM_LOG_LEVEL": "WARNING"}
    root = Path(__file__).resolve().parent.parent
    process = subprocess.Popen([sys.executable, "manage.py", "workers"], cwd=root, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    yield process
    process.terminate()
    try:
        # Longer than the supervisor's own grace: killed before it, it would leave its clusters running (each in
        # a session of its own), holding the test database open.
        process.wait(timeout=Supervisor.GRACE_SECONDS + 15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll until predicate() is truthy; returns its value or fails the test with the timeout."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout}s")
