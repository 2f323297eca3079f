"""Threads and their append-only event log."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from memory.audit import audit
from memory.db.retry import retried_on_deadlock
from memory.deletion.journal import journal_event_deletion
from memory.errors import Conflict, InvalidInput, NotFound
from memory.models import Tombstone
from memory.policy.secrets import refuse_secrets
from memory.scope import READ, WRITE, Scope
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


@dataclass
class CreateResult:
    thread: Thread
    created: bool


def _thread_replay(scope: Scope, key: str, digest: str) -> CreateResult | None:
    thread = Thread.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id, idempotency_key=key).first()
    if thread is None:
        return None
    if thread.payload_hash != digest:
        raise Conflict(f"Idempotency-Key '{key}' was already used for a different thread; use a new key.",
                       code="idempotency_conflict")
    return CreateResult(thread=thread, created=False)


@transaction.atomic
def thread_create(*, scope: Scope, title: str = "", metadata: dict[str, Any] | None = None,
                  idempotency_key: str | None = None) -> CreateResult:
    """A new thread; with an Idempotency-Key, the thread created under that key (same body) if there is one."""
    scope.require(WRITE)
    scope.require_threads()
    refuse_secrets({"title": title, "metadata": metadata or {}, "idempotency_key": idempotency_key or ""})
    digest = request_hash({"title": title, "metadata": metadata or {}})
    if idempotency_key and (replay := _thread_replay(scope, idempotency_key, digest)) is not None:
        return replay
    try:
        with transaction.atomic():
            thread = Thread.objects.create(tenant_id=scope.tenant_id, subject_id=scope.subject_id, title=title,
                                           metadata=metadata or {}, actor=scope.actor,
                                           idempotency_key=idempotency_key or None, payload_hash=digest)
    except IntegrityError:  # a twin request with the same key committed first
        replay = _thread_replay(scope, idempotency_key or "", digest)
        if replay is None:
            raise
        return replay
    audit(actor=scope.actor, action="thread.create", object_type="thread", object_id=thread.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id)
    return CreateResult(thread=thread, created=True)


def _replay(existing: ThreadEvent, digest: str, key: str) -> AppendResult:
    if existing.payload_hash != digest:
        raise Conflict(f"Idempotency-Key '{key}' was already used for a different event; use a new key.",
                       code="idempotency_conflict")
    return AppendResult(event=existing, created=False)


@retried_on_deadlock
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


MAX_BATCH = 100


@retried_on_deadlock
@transaction.atomic
def thread_events_append(*, scope: Scope, thread_id: str,
                         items: list[tuple[EventInput, str | None]]) -> list[AppendResult]:
    """Append several events in order, all or none, with consecutive sequence numbers (the thread lock is
    held from the first to the last, so no other append lands between them). Each item may carry its own
    Idempotency-Key: a replayed batch returns the events it created the first time."""
    if not items:
        raise InvalidInput("Give at least one event.", code="invalid")
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"A batch holds at most {MAX_BATCH} events; got {len(items)}.", code="batch_too_large")
    keys = [key for _, key in items if key]
    if len(keys) != len(set(keys)):
        raise InvalidInput("Each event of a batch needs its own Idempotency-Key.", code="invalid_idempotency_key")
    return [thread_event_append(scope=scope, thread_id=thread_id, item=item, idempotency_key=key)
            for item, key in items]


def journal_event(scope: Scope, thread_id: str, event_id: str) -> None:
    """A blanked event goes into the deletion journal, so that restoring an older backup blanks it again."""
    journal_event_deletion(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                           subject_hash=subject_hash(scope.tenant_id, scope.subject_external_id),
                           thread_id=thread_id, event_id=event_id, actor=scope.actor)


@retried_on_deadlock
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
        journal_event(scope, thread.pk, event.pk)
    stale = summaries_invalidate(thread=thread, event=event, blank=True,
                                 reason=f"event {event.pk} (seq {event.seq}) was deleted")
    audit(actor=scope.actor, action="thread_event.delete", object_type="thread_event", object_id=event.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"thread_id": thread.pk, "seq": event.seq, "stale_summaries": stale})
    return event, stale


@retried_on_deadlock
@transaction.atomic
def thread_event_pop(*, scope: Scope, thread_id: str) -> ThreadEvent | None:
    """Take the thread's last recorded event off the log: returned as it was, blanked in place (row and seq
    stay, the summaries over it go stale), exactly like deleting it by id. None when no event is left.

    Under the thread lock, so two pops never return the same event and an append racing the pop is
    either popped whole or not at all.

    Needs ``read`` as well as ``write``: the answer is the stored content taken off the log."""
    scope.require(WRITE)
    scope.require(READ)
    scope.require_threads()
    thread = lock_thread(scope, thread_id)
    event = ThreadEvent.objects.filter(thread=thread, status=ThreadEvent.Status.RECORDED).order_by("-seq").first()
    if event is None:
        return None
    blank_events(ThreadEvent.objects.filter(pk=event.pk))
    tombstone_events(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id, event_ids=[event.pk])
    journal_event(scope, thread.pk, event.pk)
    stale = summaries_invalidate(thread=thread, event=event, blank=True,
                                 reason=f"event {event.pk} (seq {event.seq}) was deleted")
    audit(actor=scope.actor, action="thread_event.pop", object_type="thread_event", object_id=event.pk,
          tenant_id=scope.tenant_id, subject_id=scope.subject_id,
          data={"thread_id": thread.pk, "seq": event.seq, "stale_summaries": stale})
    # The caller gets the content it took off the log; the row itself holds none any more.
    event.status, event.deleted_at = ThreadEvent.Status.DELETED, timezone.now()
    return event


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
