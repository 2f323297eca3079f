"""``EngramSession``: an OpenAI Agents SDK ``Session`` on an Engram thread (extra ``engram-client[openai-agents]``).

    from agents import Agent, Runner
    from engram_client.openai_agents import EngramSession

    session = EngramSession("support-42", base_url="http://127.0.0.1:8000", api_key="egk_...",
                            subject_id="usr_alice")
    await Runner.run(agent, "Hello", session=session)

The session is one thread of the principal's subject, named by the session id (the thread is created on
first use, and found again by any process with the same id, key and subject). Each SDK item is one event
of the thread's append-only log, kept verbatim in the event's ``data["item"]`` (so ``get_items`` returns
exactly the dicts that were added, in the order of their sequence numbers); the event's kind, role and
text let Engram's summaries and people read the conversation. Semantics follow the SDK's
``SQLiteSession``: ``get_items(limit)`` is the latest ``limit`` items oldest first (0: none; None or
negative: all), ``add_items`` appends in one all-or-nothing call, ``pop_item`` takes the newest item off the
log, ``clear_session`` clears the thread through Engram's deletion machinery (the items are gone for the
next read at once; the job finishes and verifies the rest). It works under ``EncryptedSession`` (whose
envelopes are stored as opaque items) and from several threads, each with its own event loop.

Engram's write gate applies: an item holding what looks like a secret (a password, an API key) is
refused with :class:`~engram_client.errors.SecretDetected` and nothing of that ``add_items`` is stored; an
item larger than the server's ``ENGRAM_MAX_EVENT_DATA_BYTES`` (256 KiB by default) is refused too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

try:
    import agents  # noqa: F401 - the optional dependency of this integration
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError("This integration needs an extra: pip install 'engram-client[openai-agents]'") from missing
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit

from engram_client import _ops as ops
from engram_client._core import contains_nul
from engram_client.aio import AsyncEngram
from engram_client.models import ThreadEvent

KEY_PREFIX = "openai-agents:"
MAX_KEY = 200
MAX_TEXT = 4000
MAX_TOOL_TEXT = 1000
PAGE = 500
BATCH = 100
BATCH_BYTES = 4 * 1024 * 1024  # below the server's default request body limit (5 MiB)
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
T = TypeVar("T")


class EngramSession(SessionABC):
    """Conversation history of one session, kept in an Engram thread (see the module docs)."""

    def __init__(self, session_id: str, *, client: AsyncEngram | None = None, base_url: str | None = None,
                 api_key: str | None = None, principal_token: str | None = None, subject_id: str | None = None,
                 session_settings: SessionSettings | dict[str, Any] | None = None) -> None:
        self.session_id = session_id
        # As the SDK's own sessions: a dict becomes SessionSettings here, and an unknown key is refused now
        # rather than at the first read (Runner.run reads session_settings.limit as an attribute).
        self.session_settings = (coerce_session_settings(session_settings) if session_settings is not None
                                 else SessionSettings())
        self.client = client or AsyncEngram(base_url, api_key=api_key, principal_token=principal_token,
                                            subject_id=subject_id)
        self._thread_key = _thread_key(session_id)
        self._thread_id: str | None = None
        self._lock = threading.Lock()
        self._closed = False

    async def thread_id(self) -> str:
        """The Engram thread of this session (created on first use; the same for every process)."""
        with self._lock:
            if self._thread_id is not None:
                return self._thread_id
        thread = await self.client._run(ops.thread_create(
            self.session_id[:200], metadata={"session_id": self.session_id, "framework": "openai-agents"},
            key=self._thread_key))
        with self._lock:
            self._thread_id = thread.thread_id
        return thread.thread_id

    async def get_items(self, limit: int | None = None) -> list[Any]:
        self._check_open()
        limit = resolve_session_limit(limit, self.session_settings)
        if limit == 0:
            return []
        thread_id = await self.thread_id()
        if limit is None or limit < 0:
            return [item for e in await self._all_events(thread_id) if (item := _item_of(e)) is not None]
        items: list[Any] = []
        before: int | None = None
        while len(items) < limit:
            page = await self.client._run(ops.thread_events(thread_id, tail=min(PAGE, limit - len(items)),
                                                            before=before, status="recorded"))
            items = [item for e in page.results if (item := _item_of(e)) is not None] + items
            if page.next_before is None:
                break
            before = page.next_before
        return items[-limit:]

    async def add_items(self, items: list[Any]) -> None:
        self._check_open()
        if not items:
            return
        events = [_event_of(item) for item in items]

        async def append() -> None:
            thread_id = await self.thread_id()
            for chunk in _chunks(events):
                await self.client._run(ops.thread_append_many(thread_id, chunk))

        await _settled(append())

    async def pop_item(self) -> Any | None:
        self._check_open()

        async def pop() -> Any | None:
            thread_id = await self.thread_id()
            while True:
                event = await self.client._run(ops.thread_pop(thread_id))
                if event is None:
                    return None
                item = _item_of(event)
                if item is not None:  # an event this session cannot read as an item is dropped, like a corrupt row
                    return item

        return await _settled(pop())

    async def clear_session(self) -> None:
        self._check_open()

        async def clear() -> None:
            await self.client._run(ops.thread_clear(await self.thread_id()))

        await _settled(clear())

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    async def _all_events(self, thread_id: str) -> list[ThreadEvent]:
        events: list[ThreadEvent] = []
        after = 0
        while True:
            page = await self.client._run(ops.thread_events(thread_id, after=after, limit=PAGE, status="recorded"))
            events.extend(page.results)
            if page.next_after is None:
                return events
            after = page.next_after

    def close(self) -> None:
        """Refuse further use of this session object (its history stays in Engram). Connections belong to
        the client: ``await session.client.aclose()``."""
        self._closed = True


async def _settled(mutation: Coroutine[Any, Any, T]) -> T:
    """Run a write to its end even when the caller is cancelled meanwhile, then let the cancellation through:
    the caller never has to guess whether a half-sent write landed (the SDK's own sessions do the same)."""
    task = asyncio.ensure_future(mutation)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result


def _thread_key(session_id: str) -> str:
    key = KEY_PREFIX + session_id
    if len(key) <= MAX_KEY and session_id.strip() == session_id and session_id:
        return key
    return KEY_PREFIX + "sha256:" + hashlib.sha256(session_id.encode()).hexdigest()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") or p.get("refusal") or "" for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return ""


def _event_of(item: Any) -> dict[str, Any]:
    """The thread event that holds one SDK item: the item verbatim in data["item"], plus what lets Engram
    read the conversation (kind, role, text; the tool and call id summaries mention)."""
    if not isinstance(item, dict):
        raise TypeError(f"A session item is a dict, not {type(item).__name__}.")
    if contains_nul(item):
        raise ValueError("Engram's database cannot store the NUL character (\\x00) in an item.")
    event: dict[str, Any] = {"kind": "other", "data": {"item": item}}
    kind = str(item.get("type") or "message")
    role = item.get("role")
    call_id = item.get("call_id") or item.get("id")
    if kind == "message" and role in ROLES and (text := _text_of(item.get("content")).strip()):
        event.update(kind="message", role=ROLES[role], text=text[:MAX_TEXT])
    elif kind.endswith("_call_output") or kind.endswith("_output"):
        output = item.get("output")
        event.update(kind="tool_result", role="tool", text=(output if isinstance(output, str) else "")[:MAX_TOOL_TEXT])
        event["data"]["tool_call_id"] = call_id
    elif kind.endswith("_call"):
        event.update(kind="tool_call", role="assistant")
        event["data"].update(tool=item.get("name") or kind, tool_call_id=call_id)
    elif kind in ("mcp_approval_request", "mcp_approval_response"):
        approved = item.get("approve")
        event.update(kind="approval")
        event["data"].update(approval_id=item.get("approval_request_id") or item.get("id"),
                             status="requested" if approved is None else ("granted" if approved else "denied"))
    if isinstance(event.get("text"), str):
        event["text"] = event["text"].strip()
    return event


def _item_of(event: ThreadEvent) -> Any | None:
    """The SDK item an event holds; an event written by someone else is read as a plain message."""
    if "item" in event.data:
        return event.data["item"]
    if event.kind == "message" and event.text:
        return {"role": event.role or "user", "content": event.text}
    return None


def _chunks(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Batches within the server's limits (100 events, a request body under 5 MiB), in order."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for event in events:
        event_size = len(json.dumps(event, default=str))
        if chunks[-1] and (len(chunks[-1]) >= BATCH or size + event_size > BATCH_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(event)
        size += event_size
    return chunks


__all__ = ["EngramSession"]
