"""The clients against a real server: pytest-django's live_server (a threaded WSGI server on a socket), the
real database, the real embedding model. Modules that need the worker's effects (embeddings, deletion jobs)
use ``run_tasks_inline``: tasks then run in-process as each request commits (django-q2 sync mode), so a test
sees what a deployment with a running worker shows moments later. The parity modules leave tasks queued.

Tenants, keys and tokens are made through the services, as an operator would; everything after that goes
over HTTP through engram_client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from engram_client import AsyncEngram, Engram

T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run in a thread of its own: the browser tests' Playwright keeps an event loop running in the
    main thread for the whole session, and asyncio.run refuses to start inside a running loop."""
    with ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


@dataclass
class Server:
    url: str
    key: str  # read, write, propose, mint
    tenant: Any

    def token(self, subject: str, namespaces: list[str] | None = None) -> str:
        from memory.identity.services import principal_token_mint

        token, _, _ = principal_token_mint(tenant=self.tenant, subject_external_id=subject, namespaces=namespaces)
        return token

    def client(self, subject: str = "usr_owner", **kwargs: Any) -> Engram:
        """A client that mints its own tokens for ``subject``."""
        return Engram(self.url, api_key=self.key, subject_id=subject, retries=1, **kwargs)

    def aclient(self, subject: str = "usr_owner", **kwargs: Any) -> AsyncEngram:
        return AsyncEngram(self.url, api_key=self.key, subject_id=subject, retries=1, **kwargs)

    def key_with(self, *scopes: str, namespaces: list[str] | None = None) -> str:
        from memory.identity.services import agent_key_create

        _, raw = agent_key_create(tenant=self.tenant, name=f"key-{'-'.join(scopes)}", permissions=list(scopes),
                                  namespaces=namespaces)
        return raw


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """The OpenAI Agents SDK would export traces to OpenAI: these tests are offline."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)


@pytest.fixture
def run_tasks_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def server(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Server:
    from django.db import connections

    from memory.identity.services import agent_key_create, tenant_create

    # The live server answers each request in a new thread; a persistent connection (CONN_MAX_AGE) would
    # outlive its thread and pile up until Postgres refuses new ones. Close each at the request's end.
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 0)

    tenant = tenant_create(slug="acme")
    _, key = agent_key_create(tenant=tenant, name="agent", permissions=["read", "write", "propose", "mint"])
    return Server(url=live_server.url, key=key, tenant=tenant)


@pytest.fixture
def owner(server: Server) -> Engram:
    with server.client("usr_owner") as client:
        yield client


@pytest.fixture
def outsider(server: Server) -> Engram:
    """Another subject of the same tenant."""
    with server.client("usr_outsider") as client:
        yield client
