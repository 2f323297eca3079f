"""The asynchronous client, :class:`AsyncEngram`: the same methods as :class:`~engram_client.Engram`, awaited.

One instance may be used from several threads, each running its own event loop: an httpx.AsyncClient
belongs to the loop it was made in, so the client keeps one per loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar

import httpx

from engram_client import _ops as ops
from engram_client._core import (
    Call,
    Credentials,
    RetryPolicy,
    Run,
    Step,
    Wait,
    async_method,
    base_url_from,
    conduct,
    credentials_from,
)
from engram_client.client import DEFAULT_TIMEOUT
from engram_client.models import DeletionJob, ThreadCleared

T = TypeVar("T")


class _AsyncResource:
    def __init__(self, client: AsyncEngram) -> None:
        self._client = client

    async def _run(self, call: Call[T]) -> T:
        return await self._client._run(call)


class AsyncThreads(_AsyncResource):
    """Thread state: threads and their append-only events, summaries, workflow checkpoints, tool calls."""

    create = async_method(ops.thread_create)
    get = async_method(ops.thread_get)
    list = async_method(ops.thread_list)
    append = async_method(ops.thread_append)
    append_many = async_method(ops.thread_append_many)
    events = async_method(ops.thread_events)
    event = async_method(ops.thread_event)
    delete_event = async_method(ops.thread_event_delete)
    pop = async_method(ops.thread_pop)
    summarize = async_method(ops.thread_summarize)
    add_summary = async_method(ops.thread_add_summary)
    summary = async_method(ops.thread_summary)
    summaries = async_method(ops.thread_summaries)
    checkpoint = async_method(ops.checkpoint_get)
    save_checkpoint = async_method(ops.checkpoint_save)
    record_tool_call = async_method(ops.tool_call_record)
    complete_tool_call = async_method(ops.tool_call_complete)
    tool_call = async_method(ops.tool_call_get)

    async def clear(self, thread_id: str, *, wait: bool = False, timeout: float = 60.0) -> ThreadCleared:
        """Clear every event so far: they read as gone at once; ``wait=True`` also waits for the deletion
        job that finishes and verifies it."""
        cleared = await self._run(ops.thread_clear(thread_id))
        if wait:
            await self._client.wait_for_deletion(cleared.deletion_id, timeout=timeout)
        return cleared


class AsyncDocuments(_AsyncResource):
    """Knowledge: documents of access domains."""

    ingest = async_method(ops.document_ingest)
    ingest_many = async_method(ops.document_ingest_many)
    get = async_method(ops.document_get)
    list = async_method(ops.document_list)
    delete = async_method(ops.document_delete)


class AsyncProcedures(_AsyncResource):
    """Reviewed, versioned instructions: read them, propose changes (a reviewer decides)."""

    list = async_method(ops.procedure_list)
    get = async_method(ops.procedure_get)
    versions = async_method(ops.procedure_versions)
    propose = async_method(ops.procedure_propose)
    proposal = async_method(ops.procedure_proposal)
    proposals = async_method(ops.procedure_proposals)


class AsyncEngram:
    """The async twin of :class:`~engram_client.Engram` (same arguments, same methods, awaited)."""

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None, principal_token: str | None = None,
                 subject_id: str | None = None, token_ttl: int | None = None,
                 token_namespaces: Sequence[ops.Namespace] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = 3, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url_from(base_url)
        self.credentials: Credentials = credentials_from(
            api_key, principal_token, subject_id, token_ttl,
            [ops.ns_list(n) for n in token_namespaces] if token_namespaces else None)
        self.retry = RetryPolicy(retries=retries)
        self._timeout = timeout
        self._transport = transport
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())
        self._clients_lock = threading.Lock()
        self.threads = AsyncThreads(self)
        self.documents = AsyncDocuments(self)
        self.procedures = AsyncProcedures(self)

    # --- long-term memory ---------------------------------------------------------------------------
    remember = async_method(ops.remember)
    record_outcome = async_method(ops.record_outcome)
    propose = async_method(ops.propose)
    search = async_method(ops.search)
    retrieval = async_method(ops.retrieval)
    fact = async_method(ops.fact)
    get = async_method(ops.get)
    list = async_method(ops.list_memories)
    history = async_method(ops.history)
    correct = async_method(ops.correct)
    deletion = async_method(ops.deletion)
    export = async_method(ops.export)
    mint_token = async_method(ops.mint_token)
    health = async_method(ops.health)

    async def forget(self, memory_id: str, *, wait: bool = False, timeout: float = 60.0,
                     poll_interval: float = 0.5) -> DeletionJob:
        """Delete a record everywhere; ``wait=True`` polls the deletion job to completion."""
        job = await self._run(ops.forget(memory_id))
        if wait:
            return await self.wait_for_deletion(job.deletion_id, timeout=timeout, poll_interval=poll_interval)
        return job

    async def erase_subject(self, *, wait: bool = False, timeout: float = 120.0) -> DeletionJob:
        """Erase everything held about the principal's subject. Irreversible."""
        job = await self._run(ops.erase_subject())
        return await self.wait_for_deletion(job.deletion_id, timeout=timeout) if wait else job

    async def wait_for_deletion(self, deletion_id: str, *, timeout: float = 60.0,
                                poll_interval: float = 0.5) -> DeletionJob:
        deadline = time.monotonic() + timeout
        while True:
            job = await self._run(ops.deletion(deletion_id))
            if job.done:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Deletion {deletion_id} is still {job.status} after {timeout:.0f}s "
                                   "(is the Engram worker running?)")
            await asyncio.sleep(poll_interval)

    async def wait_until_derived(self, *, timeout: float = 120.0, poll_interval: float = 0.5) -> dict[str, Any]:
        """Wait until the server's derived work is done (health's ``derived_pending`` is 0)."""
        deadline = time.monotonic() + timeout
        while True:
            body = await self.health()
            if body.get("derived_pending") == 0:
                return body
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{body.get('derived_pending')} derived items still pending after {timeout:.0f}s "
                                   f"({body.get('derived_pending_by_kind')}; is the Engram worker running?)")
            await asyncio.sleep(poll_interval)

    # --- plumbing -------------------------------------------------------------------------------------
    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            client = self._clients.get(loop)
            if client is None or client.is_closed:
                client = httpx.AsyncClient(base_url=self.base_url, timeout=self._timeout, transport=self._transport)
                self._clients[loop] = client
            return client

    async def _run(self, call: Call[T]) -> T:
        steps = conduct(call, self.retry, self.credentials)
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            reply = await self._carry_out(step)

    async def _carry_out(self, step: Step) -> Any:
        if isinstance(step, Wait):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Run):
            return await self._run(step.call)
        call = step.call
        headers = {**self.credentials.headers(principal=call.principal), **(call.headers or {})}
        try:
            return await self._http().request(call.method, call.path, params=call.params, json=call.json,
                                              headers=headers)
        except httpx.HTTPError as exc:
            return exc

    async def aclose(self) -> None:
        """Close the connections of the current event loop's client (other loops' close with their loop)."""
        with self._clients_lock:
            client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> AsyncEngram:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
