"""Where deletion reaches: every area registers the surfaces that may hold memory content.

A *request hook* runs when a deletion is asked for, in the request's transaction, before any job
step: what must leave retrieval at once (thread summaries over the deleted records' events) goes
there. A *plan hook* runs while the records to delete still hold their content and returns what a
later step will need of it (the words whose term statistics change); the deletion seals it with the
markers and hands it to the steps as ``target.sealed[name]``. A *purge surface* removes or blanks
content for a DeletionTarget and returns how many rows it touched; it must be idempotent (a retried
step runs it again). A *read check* re-reads one read surface as the owning principal and returns
the places where a marker still shows (empty = clean); the deletion job reports ``completed`` only
when every read check comes back empty.

Areas register at import of their ``deletion_surfaces`` module (imported from AppConfig.ready()),
so the deletion job needs no knowledge of threads, knowledge or retrieval internals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class DeletionTarget:
    tenant_id: int
    subject_id: int
    subject_external_id: str
    # Records being deleted. For a subject erasure: every record of the subject.
    memory_ids: tuple[str, ...] = ()
    # Event primary keys (memory.Event.id) whose content goes with the records.
    event_ids: tuple[str, ...] = ()
    # Strings that must not survive anywhere (the records' text and fact values), for read checks.
    markers: tuple[str, ...] = ()
    whole_subject: bool = False
    # Knowledge documents being deleted (knowledge.Document ids), when the target is a document.
    document_ids: tuple[int, ...] = field(default=())
    # Threads being cleared, as (thread id, last sequence number cleared): events appended after the
    # clear are a new conversation and stay.
    threads: tuple[tuple[str, int], ...] = field(default=())
    # When the deletion was asked for. A statement made after it (a new source event) that repeats the
    # deleted words is the person saying it again, not deleted content coming back: read checks leave it.
    requested_at: datetime | None = None
    # What the plan hooks read from the records before they were purged, by hook name (sealed in the job).
    sealed: dict[str, Any] = field(default_factory=dict)


PurgeFn = Callable[[DeletionTarget], int]
ReadCheckFn = Callable[[DeletionTarget], list[str]]
HookFn = Callable[[DeletionTarget], object]


@dataclass(frozen=True)
class Surface:
    name: str
    order: int
    purge: PurgeFn


_surfaces: dict[str, Surface] = {}
_read_checks: dict[str, ReadCheckFn] = {}
_request_hooks: dict[str, HookFn] = {}
_plan_hooks: dict[str, HookFn] = {}
# Kinds of job whose target is not a subject's memory, and the name prefix of the only surfaces and read checks
# they walk (a knowledge document: the knowledge surfaces). Every other kind walks every surface.
_kind_prefixes: dict[str, str] = {}


def job_kind(kind: str, *, prefix: str) -> None:
    """Register a kind of deletion job that walks only the surfaces and read checks whose names start with
    ``prefix``, through the same runner (memory/deletion/services.py) as every other job."""
    _kind_prefixes[kind] = prefix


def on_request(name: str) -> Callable[[HookFn], HookFn]:
    """Register a hook run when a deletion is asked for (``memory.deletion.services``), in its transaction."""

    def register(fn: HookFn) -> HookFn:
        _request_hooks[name] = fn
        return fn

    return register


def request_hooks() -> list[HookFn]:
    return [fn for _, fn in sorted(_request_hooks.items())]


def on_plan(name: str) -> Callable[[HookFn], HookFn]:
    """Register a hook run when the deletion of records (not a whole subject) is planned, while they still hold
    their content. What it returns must be JSON; it is sealed with the markers (never stored in the clear) and given
    to every step as ``target.sealed[name]``."""

    def register(fn: HookFn) -> HookFn:
        _plan_hooks[name] = fn
        return fn

    return register


def plan_hooks() -> list[tuple[str, HookFn]]:
    return sorted(_plan_hooks.items())


def purge_surface(name: str, *, order: int = 50) -> Callable[[PurgeFn], PurgeFn]:
    """Register a purge step. Lower ``order`` runs first; the record itself should run last-but-one
    and the tombstone last, so a crash midway leaves content-bearing rows findable for the retry."""

    def register(fn: PurgeFn) -> PurgeFn:
        _surfaces[name] = Surface(name=name, order=order, purge=fn)
        return fn

    return register


def read_check(name: str) -> Callable[[ReadCheckFn], ReadCheckFn]:
    def register(fn: ReadCheckFn) -> ReadCheckFn:
        _read_checks[name] = fn
        return fn

    return register


def surfaces(kind: str | None = None) -> list[Surface]:
    """Every purge surface in order, or those a registered ``job_kind`` walks."""
    prefix = _kind_prefixes.get(kind or "", "")
    return sorted((s for s in _surfaces.values() if s.name.startswith(prefix)), key=lambda s: (s.order, s.name))


def read_checks(kind: str | None = None) -> dict[str, ReadCheckFn]:
    prefix = _kind_prefixes.get(kind or "", "")
    return dict(sorted((name, fn) for name, fn in _read_checks.items() if name.startswith(prefix)))
