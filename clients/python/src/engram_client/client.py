"""The synchronous client, :class:`Engram`.

    from engram_client import Engram

    client = Engram("http://127.0.0.1:8000", api_key="egk_...", subject_id="usr_alice")   # mints tokens
    client.remember("Prefers aisle seats", namespace=["user", "travel_preferences"],
                    field="seat_preference", value="aisle")
    for packet in client.search("which seat?").packets:
        print(packet.content, packet.memory_id, packet.score)

Thread-safe: one instance may serve many threads (httpx.Client is).
"""

from __future__ import annotations

import time
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
    base_url_from,
    conduct,
    credentials_from,
    sync_method,
)
from engram_client.models import DeletionJob, ThreadCleared

T = TypeVar("T")
DEFAULT_TIMEOUT = 30.0


class _Resource:
    def __init__(self, client: Engram) -> None:
        self._client = client

    def _run(self, call: Call[T]) -> T:
        return self._client._run(call)


class Threads(_Resource):
    """Thread state: threads and their append-only events, summaries, workflow checkpoints, tool calls."""

    create = sync_method(ops.thread_create)
    get = sync_method(ops.thread_get)
    list = sync_method(ops.thread_list)
    append = sync_method(ops.thread_append)
    append_many = sync_method(ops.thread_append_many)
    events = sync_method(ops.thread_events)
    event = sync_method(ops.thread_event)
    delete_event = sync_method(ops.thread_event_delete)
    pop = sync_method(ops.thread_pop)
    summarize = sync_method(ops.thread_summarize)
    add_summary = sync_method(ops.thread_add_summary)
    summary = sync_method(ops.thread_summary)
    summaries = sync_method(ops.thread_summaries)
    checkpoint = sync_method(ops.checkpoint_get)
    save_checkpoint = sync_method(ops.checkpoint_save)
    record_tool_call = sync_method(ops.tool_call_record)
    complete_tool_call = sync_method(ops.tool_call_complete)
    tool_call = sync_method(ops.tool_call_get)

    def clear(self, thread_id: str, *, wait: bool = False, timeout: float = 60.0) -> ThreadCleared:
        """Clear every event so far: they read as gone at once; ``wait=True`` also waits for the deletion
        job that finishes and verifies it."""
        cleared = self._run(ops.thread_clear(thread_id))
        if wait:
            self._client.wait_for_deletion(cleared.deletion_id, timeout=timeout)
        return cleared


class Documents(_Resource):
    """Knowledge: documents of access domains."""

    ingest = sync_method(ops.document_ingest)
    ingest_many = sync_method(ops.document_ingest_many)
    get = sync_method(ops.document_get)
    list = sync_method(ops.document_list)
    delete = sync_method(ops.document_delete)


class Procedures(_Resource):
    """Reviewed, versioned instructions: read them, propose changes (a reviewer decides)."""

    list = sync_method(ops.procedure_list)
    get = sync_method(ops.procedure_get)
    versions = sync_method(ops.procedure_versions)
    propose = sync_method(ops.procedure_propose)
    proposal = sync_method(ops.procedure_proposal)
    proposals = sync_method(ops.procedure_proposals)


class Engram:
    """A client of one Engram server, acting for one principal.

    ``api_key`` is the agent key (``egk_...``). The principal is a ``principal_token`` (``ept_...``) your
    backend minted, or a ``subject_id``: then the client mints tokens itself (the key needs the ``mint``
    scope) and refreshes them before they expire. Each argument defaults to an environment variable:
    ENGRAM_URL, ENGRAM_API_KEY, ENGRAM_PRINCIPAL, ENGRAM_SUBJECT_ID.

    Writes carry an idempotency key (generated when you give none), so failed sends are retried safely
    (``retries`` times, with backoff; 429/503 answers honour Retry-After). Errors raise
    :class:`~engram_client.errors.EngramError` subclasses carrying ``code``, ``detail`` and ``status``.
    """

    def __init__(self, base_url: str | None = None, *, api_key: str | None = None, principal_token: str | None = None,
                 subject_id: str | None = None, token_ttl: int | None = None,
                 token_namespaces: Sequence[ops.Namespace] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = 3, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url_from(base_url)
        self.credentials: Credentials = credentials_from(
            api_key, principal_token, subject_id, token_ttl,
            [ops.ns_list(n) for n in token_namespaces] if token_namespaces else None)
        self.retry = RetryPolicy(retries=retries)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self.threads = Threads(self)
        self.documents = Documents(self)
        self.procedures = Procedures(self)

    # --- long-term memory ---------------------------------------------------------------------------
    remember = sync_method(ops.remember)
    record_outcome = sync_method(ops.record_outcome)
    propose = sync_method(ops.propose)
    search = sync_method(ops.search)
    retrieval = sync_method(ops.retrieval)
    fact = sync_method(ops.fact)
    get = sync_method(ops.get)
    list = sync_method(ops.list_memories)
    history = sync_method(ops.history)
    correct = sync_method(ops.correct)
    deletion = sync_method(ops.deletion)
    export = sync_method(ops.export)
    mint_token = sync_method(ops.mint_token)
    health = sync_method(ops.health)

    def forget(self, memory_id: str, *, wait: bool = False, timeout: float = 60.0,
               poll_interval: float = 0.5) -> DeletionJob:
        """Delete a record everywhere. It reads as deleted at once; the returned deletion job purges every
        surface and verifies by reading. ``wait=True`` polls the job until it is completed or failed
        (:class:`TimeoutError` after ``timeout`` seconds)."""
        job = self._run(ops.forget(memory_id))
        return self.wait_for_deletion(job.deletion_id, timeout=timeout, poll_interval=poll_interval) if wait else job

    def erase_subject(self, *, wait: bool = False, timeout: float = 120.0) -> DeletionJob:
        """Erase everything held about the principal's subject. Irreversible."""
        job = self._run(ops.erase_subject())
        return self.wait_for_deletion(job.deletion_id, timeout=timeout) if wait else job

    def wait_for_deletion(self, deletion_id: str, *, timeout: float = 60.0, poll_interval: float = 0.5) -> DeletionJob:
        deadline = time.monotonic() + timeout
        while True:
            job = self._run(ops.deletion(deletion_id))
            if job.done:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Deletion {deletion_id} is still {job.status} after {timeout:.0f}s "
                                   "(is the Engram worker running?)")
            time.sleep(poll_interval)

    def wait_until_derived(self, *, timeout: float = 120.0, poll_interval: float = 0.5) -> dict[str, Any]:
        """Wait until the server's derived work is done (health's ``derived_pending`` is 0): every embedding,
        context window, subject index and summary of what was written so far. Returns the health body."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.health()
            if body.get("derived_pending") == 0:
                return body
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{body.get('derived_pending')} derived items still pending after {timeout:.0f}s "
                                   f"({body.get('derived_pending_by_kind')}; is the Engram worker running?)")
            time.sleep(poll_interval)

    # --- plumbing -------------------------------------------------------------------------------------
    def _run(self, call: Call[T]) -> T:
        steps = conduct(call, self.retry, self.credentials)
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            reply = self._carry_out(step)

    def _carry_out(self, step: Step) -> Any:
        if isinstance(step, Wait):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Run):
            return self._run(step.call)
        call = step.call
        headers = {**self.credentials.headers(principal=call.principal), **(call.headers or {})}
        try:
            return self._http.request(call.method, call.path, params=call.params, json=call.json, headers=headers)
        except httpx.HTTPError as exc:
            return exc

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
