"""Every domain operation, once: each function returns the :class:`Call` that performs it.

Writes carry their idempotency key (``source.event_id`` for memory writes, ``Idempotency-Key`` for
thread creates and appends, ``idempotency_key`` for tool calls), generated here when the caller gives
none, so the client may resend a write whose answer was lost without writing twice.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from engram_client._core import Call, field_of, json_body, model
from engram_client.errors import EngramError, PreconditionFailed
from engram_client.models import (
    Candidate,
    Checkpoint,
    DeletionJob,
    Document,
    EventPage,
    History,
    Memory,
    Page,
    PrincipalToken,
    Procedure,
    Proposal,
    SearchResult,
    Summary,
    Thread,
    ThreadCleared,
    ThreadEvent,
    ToolCall,
)

Namespace = Sequence[str] | str


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def new_key(prefix: str = "evt") -> str:
    """A random idempotency key. Base32, not hex: Engram's secret scan reads 13-19 digits in a row that pass
    the Luhn check as a payment card number, and a hex uuid has such a run about once in 250 keys."""
    return f"{prefix}_{base64.b32encode(uuid.uuid4().bytes).decode().rstrip('=').lower()}"


def ns_list(namespace: Namespace) -> list[str]:
    """["user", "prefs"] or "user/prefs" -> ["user", "prefs"]."""
    return namespace.split("/") if isinstance(namespace, str) else list(namespace)


def ns_path(namespace: Namespace) -> str:
    return "/".join(ns_list(namespace))


def seg(value: str | int) -> str:
    """One path segment, escaped."""
    return quote(str(value), safe="")


def _iso(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _record_body(*, namespace: Namespace, field: str, value: Any, text: str | None, kind: str, type: str,
                 source_type: str | None, source_text: str | None, event_id: str | None,
                 occurred_at: datetime | str | None, valid_from: datetime | str | None,
                 valid_until: datetime | str | None) -> dict[str, Any]:
    if value is MISSING:
        if text is None:
            raise ValueError("Give the value (and/or the text) to remember.")
        value = text
    source = _drop_none({"type": source_type, "event_id": event_id or new_key(), "text": source_text,
                         "occurred_at": _iso(occurred_at)})
    return _drop_none({"namespace": ns_list(namespace), "kind": kind, "type": type,
                       "fact": {"field": field, "value": value}, "text": text, "source": source,
                       "valid_from": _iso(valid_from), "valid_until": _iso(valid_until)})


# --- long-term memory -----------------------------------------------------------------------------


def remember(text: str | None = None, *, namespace: Namespace, field: str, value: Any = MISSING, kind: str = "fact",
             type: str = "semantic", source_text: str | None = None, event_id: str | None = None,
             occurred_at: datetime | str | None = None, valid_from: datetime | str | None = None,
             valid_until: datetime | str | None = None) -> Call[Memory]:
    """Store what the user said, as an explicit statement: confirmed at once, through the write gate
    (scope, secret scan, memory-class policy, precedence). ``value`` defaults to ``text``.

    ``event_id`` is the idempotency key (generated when not given): the same id and body return the
    record already stored (200), the same id with another body is a 409 :class:`Conflict`."""
    body = _record_body(namespace=namespace, field=field, value=value, text=text, kind=kind, type=type,
                        source_type="explicit_user_statement", source_text=source_text, event_id=event_id,
                        occurred_at=occurred_at, valid_from=valid_from, valid_until=valid_until)
    return Call("POST", "/memories", parse=model(Memory), json=body)


def record_outcome(*, namespace: Namespace, field: str, value: Any = MISSING,
                   reference: dict[str, str] | None = None, text: str | None = None, kind: str = "outcome",
                   source_type: str = "verified_outcome", source_text: str | None = None,
                   event_id: str | None = None, occurred_at: datetime | str | None = None,
                   valid_from: datetime | str | None = None, valid_until: datetime | str | None = None) -> Call[Memory]:
    """Store a deterministic outcome your application verified: the state itself (``value``, any JSON) or
    a ``reference={"system": ..., "id": ...}`` to the system of record. ``source_type`` is one of
    ``verified_outcome``, ``system_of_record``, ``org_record``."""
    if reference is None and value is MISSING:
        raise ValueError("Give the verified value or a reference.")
    body = _record_body(namespace=namespace, field=field, value=None if reference else value, text=text,
                        kind=kind, type="semantic", source_type=source_type, source_text=source_text,
                        event_id=event_id, occurred_at=occurred_at, valid_from=valid_from, valid_until=valid_until)
    if reference is not None:
        body.pop("fact")
        body.update(field=field, reference=reference)
    return Call("POST", "/outcomes", parse=model(Memory), json=body)


def propose(text: str | None = None, *, namespace: Namespace, field: str, value: Any = MISSING,
            kind: str = "inference", evidence: list[dict[str, Any]] | None = None,
            confidence: float | None = None, source_text: str | None = None,
            event_id: str | None = None) -> Call[Candidate]:
    """Propose what the model inferred: stored as a pending candidate, never a fact until consolidation
    (and, where the memory class says so, a reviewer) accepts it."""
    body = _record_body(namespace=namespace, field=field, value=value, text=text, kind=kind, type="semantic",
                        source_type="model_inferred", source_text=source_text, event_id=event_id,
                        occurred_at=None, valid_from=None, valid_until=None)
    if evidence is not None:
        body["evidence"] = evidence
    if confidence is not None:
        body["confidence"] = confidence
    return Call("POST", "/candidates", parse=model(Candidate), json=body)


def search(query: str, *, namespaces: Sequence[Namespace] | None = None, kinds: Sequence[str] | None = None,
           types: Sequence[str] | None = None, filters: dict[str, Any] | None = None, limit: int | None = None,
           budget_tokens: int | None = None, include: Sequence[str] | None = None) -> Call[SearchResult]:
    """Retrieve memory for a query: scope first, then lexical + semantic search, ranking and a token budget.
    Returns typed packets with provenance (``content_role: "data"``), the budget used, and what was
    dropped and why. ``include`` adds ``"summaries"``, ``"procedures"``, ``"knowledge"``."""
    body = _drop_none({"query": query, "namespaces": [ns_list(n) for n in namespaces] if namespaces else None,
                       "kinds": list(kinds) if kinds else None, "types": list(types) if types else None,
                       "filters": filters, "limit": limit, "budget_tokens": budget_tokens,
                       "include": list(include) if include else None})
    return Call("POST", "/retrieve", parse=model(SearchResult), json=body)


def retrieval(retrieval_id: str) -> Call[dict[str, Any]]:
    """The log of one retrieval: every candidate, its ranks and scores, why it was kept or dropped."""
    return Call("GET", f"/retrievals/{seg(retrieval_id)}", parse=json_body)


def fact(namespace: Namespace, field: str) -> Call[Memory]:
    """The one record precedence chooses for (namespace, field); :class:`NotFound` when there is none,
    :class:`Conflict` (409, with the competing records in ``.body``) when policy cannot decide."""
    return Call("GET", "/facts", parse=model(Memory), params={"namespace": ns_path(namespace), "field": field})


def get(memory_id: str) -> Call[Memory]:
    return Call("GET", f"/memories/{seg(memory_id)}", parse=model(Memory))


def list_memories(*, namespace: Namespace | None = None, kind: str | None = None, status: str | None = None,
                  limit: int = 50, offset: int = 0) -> Call[Page[Memory]]:
    """A page of records under ``namespace`` (every status unless ``status`` is given), newest first."""
    params = _drop_none({"namespace": ns_path(namespace) if namespace is not None else None, "kind": kind,
                         "status": status, "limit": limit, "offset": offset})
    return Call("GET", "/memories", parse=model(Page[Memory]), params=params)


def history(memory_id: str) -> Call[list[Memory]]:
    """The supersession chain through a record, oldest first."""
    return Call("GET", f"/memories/{seg(memory_id)}/history",
                parse=lambda response: History.model_validate(response.json()).history)


def correct(memory_id: str, value: Any = MISSING, *, text: str | None = None, source_text: str | None = None,
            event_id: str | None = None) -> Call[Memory]:
    """Correct a record: a new explicit statement supersedes it (history keeps both). ``event_id`` is the
    idempotency key (generated when not given)."""
    if value is MISSING and text is None:
        raise ValueError("Give the corrected value and/or text.")
    body: dict[str, Any] = {"source": _drop_none({"event_id": event_id or new_key(), "text": source_text})}
    if value is not MISSING:
        body["fact"] = {"value": value}
    if text is not None:
        body["text"] = text
    return Call("POST", f"/memories/{seg(memory_id)}/correct", parse=model(Memory), json=body)


def forget(memory_id: str) -> Call[DeletionJob]:
    """Delete a record (and the versions it superseded) everywhere. It reads as deleted at once; the
    returned job purges every surface and verifies by reading. Deleting twice returns the same job."""
    return Call("DELETE", f"/memories/{seg(memory_id)}", parse=model(DeletionJob))


def deletion(deletion_id: str) -> Call[DeletionJob]:
    return Call("GET", f"/deletions/{seg(deletion_id)}", parse=model(DeletionJob))


def erase_subject() -> Call[DeletionJob]:
    """Erase everything Engram holds about the principal's subject (the subject row included)."""
    return Call("DELETE", "/subject", parse=model(DeletionJob))


def export() -> Call[dict[str, Any]]:
    """Everything held about the principal's subject, as JSON."""
    return Call("GET", "/export", parse=json_body)


def mint_token(subject_id: str, *, ttl: int | None = None, namespaces: Sequence[Namespace] | None = None,
               display_name: str | None = None) -> Call[PrincipalToken]:
    """Mint a principal token for a subject (needs an agent key with the ``mint`` scope). ``display_name``
    names the subject on people's pages ("" clears it; None leaves it as it is)."""
    body = _drop_none({"subject_id": subject_id, "ttl": ttl,
                       "namespaces": [ns_list(n) for n in namespaces] if namespaces else None,
                       "display_name": display_name})
    return Call("POST", "/principal-tokens", parse=model(PrincipalToken), json=body, principal=False)


def health() -> Call[dict[str, Any]]:
    return Call("GET", "/health", parse=json_body, principal=False)


# --- thread state -----------------------------------------------------------------------------------


def thread_create(title: str = "", *, metadata: dict[str, Any] | None = None,
                  key: str | None = None) -> Call[Thread]:
    """Create a thread. ``key`` (the Idempotency-Key, generated when not given) names it: creating again
    with the same key and body returns the same thread."""
    return Call("POST", "/threads", parse=model(Thread), json={"title": title, "metadata": metadata or {}},
                headers={"Idempotency-Key": key or new_key("thr")})


def thread_get(thread_id: str) -> Call[Thread]:
    return Call("GET", f"/threads/{seg(thread_id)}", parse=model(Thread))


def thread_list(*, limit: int = 50, offset: int = 0) -> Call[Page[Thread]]:
    return Call("GET", "/threads", parse=model(Page[Thread]), params={"limit": limit, "offset": offset})


def thread_append(thread_id: str, text: str = "", *, kind: str = "message", role: str = "",
                  data: dict[str, Any] | None = None, corrects: str | None = None,
                  key: str | None = None) -> Call[ThreadEvent]:
    """Append one event (``kind``: message, tool_call, tool_result, approval); the server gives it the
    next gap-free ``seq``. ``key`` is the Idempotency-Key (generated when not given)."""
    body = _drop_none({"kind": kind, "role": role, "text": text, "data": data or {}, "corrects": corrects})
    return Call("POST", f"/threads/{seg(thread_id)}/events", parse=model(ThreadEvent), json=body,
                headers={"Idempotency-Key": key or new_key()})


def thread_append_many(thread_id: str, events: list[dict[str, Any]]) -> Call[list[ThreadEvent]]:
    """Append up to 100 events in order, all or none, with consecutive ``seq`` numbers. Each event is a dict
    of ``thread_append``'s fields (``kind``, ``role``, ``text``, ``data``, ``corrects``) and may carry its own
    ``idempotency_key`` (generated when missing)."""
    body = [{**event, "idempotency_key": event.get("idempotency_key") or new_key()} for event in events]
    return Call("POST", f"/threads/{seg(thread_id)}/events/batch", parse=field_of("results", ThreadEvent),
                json={"events": body})


def thread_events(thread_id: str, *, after: int = 0, before: int | None = None, limit: int = 100,
                  tail: int | None = None, status: str | None = None) -> Call[EventPage]:
    """Events in ``seq`` order: a page from ``after``, or the last ``tail`` events (``next_before`` pages
    further back). ``status="recorded"`` leaves out deleted (blanked) events."""
    params = _drop_none({"after": after or None, "before": before, "limit": None if tail else limit,
                         "tail": tail, "status": status})
    return Call("GET", f"/threads/{seg(thread_id)}/events", parse=model(EventPage), params=params)


def thread_event(thread_id: str, event_id: str) -> Call[ThreadEvent]:
    return Call("GET", f"/threads/{seg(thread_id)}/events/{seg(event_id)}", parse=model(ThreadEvent))


def thread_event_delete(thread_id: str, event_id: str) -> Call[ThreadEvent]:
    """Blank one event in place (its seq stays) and make the summaries over it stale."""
    return Call("DELETE", f"/threads/{seg(thread_id)}/events/{seg(event_id)}", parse=model(ThreadEvent))


def thread_pop(thread_id: str) -> Call[ThreadEvent | None]:
    """Take the last recorded event off the log and return it (None when none is left). Not retried when
    the answer is lost: a second pop would take the next event."""

    def parse(response: httpx.Response) -> ThreadEvent | None:
        event = response.json().get("event")
        return ThreadEvent.model_validate(event) if event else None

    return Call("POST", f"/threads/{seg(thread_id)}/events/pop", parse=parse, idempotent=False)


def thread_clear(thread_id: str) -> Call[ThreadCleared]:
    """Clear every event so far (they read as gone at once) through a deletion job; later appends stay."""
    return Call("DELETE", f"/threads/{seg(thread_id)}/events", parse=model(ThreadCleared))


def thread_summarize(thread_id: str, *, from_seq: int | None = None, to_seq: int | None = None) -> Call[Summary]:
    """Have the server summarise a range of events (default: all)."""
    return Call("POST", f"/threads/{seg(thread_id)}/summarize", parse=model(Summary),
                json=_drop_none({"from_seq": from_seq, "to_seq": to_seq}), idempotent=False)


def thread_add_summary(thread_id: str, text: str, *, from_seq: int, to_seq: int,
                       unresolved: list[Any] | None = None, referenced_event_ids: list[str] | None = None,
                       summarizer: dict[str, str] | None = None) -> Call[Summary]:
    """Store a summary you wrote of events ``from_seq..to_seq``."""
    body = _drop_none({"text": text, "from_seq": from_seq, "to_seq": to_seq, "unresolved": unresolved,
                       "referenced_event_ids": referenced_event_ids, "summarizer": summarizer})
    return Call("POST", f"/threads/{seg(thread_id)}/summaries", parse=model(Summary), json=body, idempotent=False)


def thread_summary(thread_id: str) -> Call[Summary]:
    """The latest fresh summary (:class:`NotFound` ``no_fresh_summary`` when there is none)."""
    return Call("GET", f"/threads/{seg(thread_id)}/summary", parse=model(Summary))


def thread_summaries(thread_id: str) -> Call[list[Summary]]:
    return Call("GET", f"/threads/{seg(thread_id)}/summaries", parse=field_of("results", Summary))


def checkpoint_get(workflow_id: str) -> Call[Checkpoint]:
    return Call("GET", f"/workflows/{seg(workflow_id)}/checkpoint", parse=model(Checkpoint))


def checkpoint_save(workflow_id: str, *, version: int | None, thread_id: str | None = None,
                    current_step: str = "", completed_steps: list[Any] | None = None, pending_approval: Any = None,
                    tool_call_id: str = "", idempotency_key: str = "", artifacts: dict[str, Any] | None = None,
                    last_verified_outcome: Any = None) -> Call[Checkpoint]:
    """Write a workflow checkpoint. ``version`` is the version you read (sent as ``If-Match``), or None for
    the first one (``If-None-Match: *``); a stale version is a :class:`PreconditionFailed` and writes
    nothing. A retry whose first attempt had landed is recognised by reading the checkpoint back."""
    state = {"thread_id": thread_id, "current_step": current_step, "completed_steps": completed_steps or [],
             "pending_approval": pending_approval, "tool_call_id": tool_call_id,
             "idempotency_key": idempotency_key, "artifacts": artifacts or {},
             "last_verified_outcome": last_verified_outcome}
    headers = {"If-None-Match": "*"} if version is None else {"If-Match": f'"{version}"'}
    expected = 1 if version is None else version + 1

    def verify(error: EngramError) -> Call[Checkpoint] | None:
        if not isinstance(error, PreconditionFailed):
            return None

        def landed(response: httpx.Response) -> Checkpoint:
            current = Checkpoint.model_validate(response.json())
            if current.version != expected or any(getattr(current, k) != v for k, v in state.items()):
                raise error
            return current

        return Call("GET", f"/workflows/{seg(workflow_id)}/checkpoint", parse=landed)

    return Call("PUT", f"/workflows/{seg(workflow_id)}/checkpoint", parse=model(Checkpoint), json=state,
                headers=headers, verify=verify)


def tool_call_record(workflow_id: str, key: str, tool: str, arguments: dict[str, Any] | None = None) -> Call[ToolCall]:
    """Record a side-effecting tool call *before* making it; ``key`` is its idempotency key."""
    return Call("POST", f"/workflows/{seg(workflow_id)}/tool-calls", parse=model(ToolCall),
                json={"idempotency_key": key, "tool": tool, "arguments": arguments or {}})


def tool_call_complete(workflow_id: str, key: str, status: str, outcome: Any = None) -> Call[ToolCall]:
    """Record the verified outcome (``status``: succeeded or failed) after the side effect."""
    return Call("PATCH", f"/workflows/{seg(workflow_id)}/tool-calls/{seg(key)}", parse=model(ToolCall),
                json={"status": status, "outcome": outcome})


def tool_call_get(workflow_id: str, key: str) -> Call[ToolCall]:
    """What is known of a tool call (:class:`NotFound`: never attempted; ``pending``: verify with the tool)."""
    return Call("GET", f"/workflows/{seg(workflow_id)}/tool-calls/{seg(key)}", parse=model(ToolCall))


# --- knowledge and procedures -------------------------------------------------------------------------


def document_ingest(access_domain: str, external_id: str, text: str, *, title: str = "", uri: str = "",
                    mime_type: str = "text/plain", metadata: dict[str, Any] | None = None) -> Call[Document]:
    """Add or update a document of an access domain (the same content again is a no-op)."""
    body = {"access_domain": access_domain, "external_id": external_id, "text": text, "title": title, "uri": uri,
            "mime_type": mime_type, "metadata": metadata or {}}
    return Call("POST", "/documents", parse=model(Document), json=body)


def document_ingest_many(documents: list[dict[str, Any]]) -> Call[dict[str, Any]]:
    """Up to 200 documents in one call; one result per document."""
    return Call("POST", "/documents/batch", parse=json_body, json={"documents": documents})


def document_get(document_id: int) -> Call[Document]:
    return Call("GET", f"/documents/{seg(document_id)}", parse=model(Document))


def document_list(*, access_domain: str | None = None, limit: int = 50, offset: int = 0) -> Call[Page[Document]]:
    params = _drop_none({"access_domain": access_domain, "limit": limit, "offset": offset})
    return Call("GET", "/documents", parse=model(Page[Document]), params=params)


def document_delete(document_id: int) -> Call[DeletionJob]:
    return Call("DELETE", f"/documents/{seg(document_id)}", parse=model(DeletionJob))


def procedure_list() -> Call[list[Procedure]]:
    return Call("GET", "/procedures", parse=field_of("results", Procedure))


def procedure_get(name: str, version: int | None = None) -> Call[Procedure]:
    """The current approved version of a procedure, or a given version."""
    path = f"/procedures/{seg(name)}" + (f"/versions/{version}" if version is not None else "")
    return Call("GET", path, parse=model(Procedure))


def procedure_versions(name: str) -> Call[list[Procedure]]:
    return Call("GET", f"/procedures/{seg(name)}/versions", parse=field_of("results", Procedure))


def procedure_propose(name: str, body: str, *, rationale: str = "", base_version: int | None = None,
                      source_event_ids: list[str] | None = None) -> Call[Proposal]:
    """Propose a new version of a procedure; a reviewer decides (agents can never publish)."""
    payload = _drop_none({"body": body, "rationale": rationale, "base_version": base_version,
                          "source_event_ids": source_event_ids})
    return Call("POST", f"/procedures/{seg(name)}/proposals", parse=model(Proposal), json=payload, idempotent=False)


def procedure_proposal(name: str, proposal_id: str) -> Call[Proposal]:
    return Call("GET", f"/procedures/{seg(name)}/proposals/{seg(proposal_id)}", parse=model(Proposal))


def procedure_proposals(name: str) -> Call[list[Proposal]]:
    return Call("GET", f"/procedures/{seg(name)}/proposals", parse=field_of("results", Proposal))
