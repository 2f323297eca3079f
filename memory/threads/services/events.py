"""Threads and their append-only event log."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory.audit import audit
from memory.errors import Conflict, InvalidInput, NotFound
from memory.models import Tombstone
from memory.policy.secrets import refuse_secrets
from memory.scope import WRITE, Scope
from memory.threads.models import Thread, ThreadEvent
from memory.threads.services.common import lock_thread, request_hash
from memory.threads.services.summaries import summaries_invalidate
from memory.tombstones import event_hash, subject_hash

# How long a deleted thread event's id stays refused as the source of a long-term memory write.
EVENT_TOMBSTONE_TTL = dt.timedelta(days=365)


@dataclass(frozen=True)
class EventInput:
    kind: str
    role: str = ""
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    corrects: str | None = None

    def canonical(self) -> dict[str, Any]:
        """What makes two appends with one Idempotency-Key 'the same append'."""
        return {"kind": self.kind, "role": self.role, "text": self.text, "data": self.data,
                "corrects": self.corrects}


@dataclass
class AppendResult:
    event: ThreadEvent
    created: bool


@transaction.atomic
def thread_create(*, scope: Scope, title: str = "", metadata: dict[str, Any] | None = None) -> Thread:
    scope.require(WRITE)
    scope.require_threads()
    refuse_secrets({"title": title, "metadata": metadata or {}})
    thread = Thread.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id, title=title,
                                   metadata=metadata or {}, actor=scope.actor)
    audit(actor=scope.actor, action="thread.create", object_type="thread", object_id=thread.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id)
    return thread


def _replay(existing: ThreadEvent, digest: str, key: str) -> AppendResult:
    if existing.payload_hash != digest:
        raise Conflict(f"Idempotency-Key '{key}' was already used for a different event; use a new key.",
                       code="idempotency_conflict")
    return AppendResult(event=existing, created=False)


@transaction.atomic
def thread_event_append(*, scope: Scope, thread_id: str, item: EventInput,
                        idempotency_key: str | None = None) -> AppendResult:
    """Append one event with the next sequence number; the same Idempotency-Key returns the original."""
    scope.require(WRITE)
    scope.require_threads()
    refuse_secrets({**item.canonical(), "idempotency_key": idempotency_key or ""})
    digest = request_hash(item.canonical())
    thread = lock_thread(scope, thread_id)
    # Under the thread lock, READ COMMITTED gives this statement a fresh snapshot: a twin request
    # that held the lock before us has committed, so its event is visible here.
    if idempotency_key:
        existing = ThreadEvent.objects.filter(thread=thread, idempotency_key=idempotency_key).first()
        if existing is not None:
            return _replay(existing, digest, idempotency_key)
    corrected = None
    if item.corrects:
        corrected = ThreadEvent.objects.filter(thread=thread, pk=item.corrects).first()
        if corrected is None:
            raise InvalidInput(f"'corrects' names no event of this thread: '{item.corrects}'.", code="unknown_event")
        if corrected.status == ThreadEvent.Status.DELETED:
            raise Conflict("The event to correct was deleted.", code="event_deleted")
    Thread.objects.filter(pk=thread.pk).update(last_seq=F("last_seq") + 1, updated_at=timezone.now())
    thread.refresh_from_db(fields=["last_seq"])
    # The unique indexes on (thread, seq) and (thread, idempotency_key) back the lock up.
    event = ThreadEvent.objects.create(
        tenant_id=scope.tenant_id, subject_id=scope.subject_id, thread=thread, seq=thread.last_seq,
        kind=item.kind, role=item.role, text=item.text, data=item.data, corrects=corrected,
        idempotency_key=idempotency_key or None, payload_hash=digest, actor=scope.actor,
    )
    audit(actor=scope.actor, action="thread_event.append", object_type="thread_event", object_id=event.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"thread_id": thread.pk, "seq": event.seq, "kind": event.kind, "corrects": item.corrects})
    if corrected is not None:
        summaries_invalidate(thread=thread, event=corrected, blank=False,
                             reason=f"event {corrected.pk} (seq {corrected.seq}) was corrected by {event.pk}")
    return AppendResult(event=event, created=True)


@transaction.atomic
def thread_event_delete(*, scope: Scope, thread_id: str, event_id: str) -> tuple[ThreadEvent, list[str]]:
    """Blank one event's content in place (its row and seq stay), mark the summaries over it stale.

    Returns the tombstoned event and the ids of the summaries made stale. Idempotent.
    """
    scope.require(WRITE)
    scope.require_threads()
    thread = lock_thread(scope, thread_id)
    event = ThreadEvent.objects.filter(thread=thread, pk=event_id).first()
    if event is None:
        raise NotFound(f"No event '{event_id}' in thread '{thread_id}' in this scope.")
    if event.status != ThreadEvent.Status.DELETED:
        blank_events(ThreadEvent.objects.filter(pk=event.pk))
        event.refresh_from_db()
        tombstone_events(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                         event_ids=[event.pk])
    stale = summaries_invalidate(thread=thread, event=event, blank=True,
                                 reason=f"event {event.pk} (seq {event.seq}) was deleted")
    audit(actor=scope.actor, action="thread_event.delete", object_type="thread_event", object_id=event.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"thread_id": thread.pk, "seq": event.seq, "stale_summaries": stale})
    return event, stale


def blank_events(events: Any) -> int:
    """Content removed, row kept: seq, kind and ids stay so the log has no holes."""
    return events.filter(status=ThreadEvent.Status.RECORDED).update(
        text="", data={}, status=ThreadEvent.Status.DELETED, deleted_at=timezone.now())


def tombstone_events(*, tenant_id: int, subject_external_id: str, event_ids: list[str]) -> None:
    # A long-term memory write citing a deleted thread event (source.event_id) is then refused as
    # "tombstoned" by the write paths, so a delayed job cannot bring the words back.
    if event_ids:
        Tombstone.objects.create(tenant_id=tenant_id, subject_hash=subject_hash(tenant_id, subject_external_id),
                                 event_hashes=[event_hash(e) for e in event_ids],
                                 expires_at=timezone.now() + EVENT_TOMBSTONE_TTL)
