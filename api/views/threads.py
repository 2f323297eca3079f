"""Thread state: /threads (events, summaries) and /workflows (checkpoints, tool calls)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.fields import StrictSerializer, check_body_scope, check_json_value, integer, text_field
from api.openapi import AGENT, BODY, ETAG, IDEMPOTENCY_KEY, IF_MATCH, IF_NONE_MATCH, Tags, errors, written
from api.paging import PageIn, page_body
from api.shared_payloads import SeqRangeOut, SummarizerOut
from memory.errors import InvalidInput
from memory.scope import READ, Scope
from memory.threads import selectors
from memory.threads.models import Checkpoint, EventKind, Summary, Thread, ThreadEvent, ToolCall
from memory.threads.services.clear import thread_clear
from memory.threads.services.events import (
    MAX_BATCH,
    EventInput,
    thread_create,
    thread_event_append,
    thread_event_delete,
    thread_event_pop,
    thread_events_append,
)
from memory.threads.services.summaries import ClientSummaryInput, summary_store, thread_summarize
from memory.threads.services.workflows import (
    CheckpointState,
    checkpoint_put,
    etag,
    tool_call_complete,
    tool_call_record,
)

MAX_KEY = 200
MAX_WORKFLOW_ID = 128
MAX_EVENTS_PAGE = 500
ROLES = ["user", "assistant", "system", "tool"]


# What every thread-state operation can refuse: thread state needs a `threads` grant.
THREAD_STATE = (*AGENT, "namespace_forbidden")
THREAD_WRITE = (*BODY, *THREAD_STATE, "scope_mismatch", "secret_detected")


class ThreadOut(serializers.Serializer):
    thread_id = serializers.CharField()
    subject_id = serializers.CharField()
    title = serializers.CharField()
    metadata = serializers.DictField()
    last_seq = serializers.IntegerField(help_text="The seq of the thread's last event (0: none yet).")
    created_at = serializers.DateTimeField()


class ThreadPageOut(serializers.Serializer):
    results = ThreadOut(many=True)
    next_offset = serializers.IntegerField(allow_null=True, help_text="Pass as `offset` for the next page.")


class EventOut(serializers.Serializer):
    """One event of a thread's append-only log."""

    event_id = serializers.CharField()
    thread_id = serializers.CharField()
    seq = serializers.IntegerField(help_text="Gap-free per thread, assigned by the server.")
    kind = serializers.ChoiceField(choices=EventKind.choices)
    role = serializers.CharField(help_text="`user`, `assistant`, `system`, `tool`, or empty.")
    text = serializers.CharField()
    data = serializers.JSONField()  # type: ignore[assignment]
    corrects = serializers.CharField(allow_null=True, help_text="The event this one corrects.")
    status = serializers.ChoiceField(choices=ThreadEvent.Status.choices,
                                     help_text="`deleted`: the content was blanked in place; the row and seq stay.")
    idempotency_key = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    deleted_at = serializers.DateTimeField(allow_null=True)


class EventPageOut(serializers.Serializer):
    thread_id = serializers.CharField()
    results = EventOut(many=True)
    next_after = serializers.IntegerField(allow_null=True, help_text="Pass as `after` for the next page.")
    next_before = serializers.IntegerField(allow_null=True, help_text="Pass as `before` (with `tail`) for older.")


class EventBatchOut(serializers.Serializer):
    thread_id = serializers.CharField()
    results = EventOut(many=True)
    created = serializers.IntegerField(help_text="How many events this call created (0: a replay).")


class PopOut(serializers.Serializer):
    thread_id = serializers.CharField()
    event = EventOut(allow_null=True, help_text="The event taken off the log, with its content; null if none.")


class ThreadClearedOut(serializers.Serializer):
    deletion_id = serializers.CharField()
    status = serializers.CharField()
    status_url = serializers.CharField()
    thread_id = serializers.CharField()
    up_to_seq = serializers.IntegerField(help_text="Events up to this seq were cleared.")
    cleared = serializers.IntegerField(help_text="How many recorded events were blanked.")


class DeletedEventOut(EventOut):
    stale_summaries = serializers.ListField(child=serializers.CharField(),
                                            help_text="Summaries over the event, made stale (and blanked) now.")


class SummaryOut(serializers.Serializer):
    """A summary of a thread's events, knowing its source range and summarizer."""

    summary_id = serializers.CharField()
    thread_id = serializers.CharField()
    origin = serializers.ChoiceField(choices=Summary.Origin.choices,
                                     help_text="`server` summaries are regenerated when stale; `client` ones stay "
                                               "stale with a reason.")
    text = serializers.CharField()
    source_range = SeqRangeOut()
    summarizer = SummarizerOut()
    created_at = serializers.DateTimeField()
    unresolved = serializers.ListField(child=serializers.JSONField())
    referenced_event_ids = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=Summary.Status.choices)
    stale_reason = serializers.CharField(allow_null=True)
    stale_at = serializers.DateTimeField(allow_null=True)
    replaced_by = serializers.CharField(allow_null=True, help_text="The regenerated summary that replaced this one.")
    regenerates = serializers.CharField(allow_null=True, help_text="The stale summary this one regenerates.")
    content_role = serializers.ChoiceField(choices=["data"])


class SummaryListOut(serializers.Serializer):
    thread_id = serializers.CharField()
    results = SummaryOut(many=True)


class CheckpointOut(serializers.Serializer):
    """A workflow's resumable state; its `version` is the ETag."""

    workflow_id = serializers.CharField()
    version = serializers.IntegerField()
    thread_id = serializers.CharField(allow_null=True)
    current_step = serializers.CharField()
    completed_steps = serializers.ListField(child=serializers.JSONField())
    pending_approval = serializers.JSONField(allow_null=True)
    tool_call_id = serializers.CharField()
    idempotency_key = serializers.CharField()
    artifacts = serializers.DictField()
    last_verified_outcome = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


# A key without `read` gets back from a write only what it sent, with ids, status and times.
STORED_CONTENT = "Left out of a write's answer to a key without the `read` scope, unless this request sent it."


class ToolCallOut(serializers.Serializer):
    """A tool call recorded before its side effect, and its verified outcome after."""

    workflow_id = serializers.CharField()
    idempotency_key = serializers.CharField()
    tool = serializers.CharField(required=False, help_text=STORED_CONTENT)
    arguments = serializers.DictField(required=False, help_text=STORED_CONTENT)
    status = serializers.ChoiceField(choices=ToolCall.Status.choices,
                                     help_text="`pending`: the effect may or may not have happened: verify with the "
                                               "tool's system before retrying.")
    outcome = serializers.JSONField(allow_null=True, required=False, help_text=STORED_CONTENT)
    outcome_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


EVENT_EXAMPLE = {
    "event_id": "evt_01JZ8QC4V6B8N0M2K4J6H8G0FD", "thread_id": "thr_01JZ8QBZ0X2C4V6B8N0M2K4J6H", "seq": 3,
    "kind": "message", "role": "user", "text": "Book me on the 9:40 to Porto.", "data": {}, "corrects": None,
    "status": "recorded", "idempotency_key": "turn-3", "created_at": "2026-05-03T09:14:02.511Z", "deleted_at": None,
}
CHECKPOINT_EXAMPLE = {
    "workflow_id": "wf_trip_42", "version": 4, "thread_id": EVENT_EXAMPLE["thread_id"], "current_step": "pay",
    "completed_steps": ["search", "choose_flight"], "pending_approval": None, "tool_call_id": "",
    "idempotency_key": "", "artifacts": {"flight": "TP123"}, "last_verified_outcome": None,
    "created_at": "2026-05-03T09:10:00.000Z", "updated_at": "2026-05-03T09:15:31.204Z",
}


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def _validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    check_body_scope(request.data, scope_of(request))
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _validated_data(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _key(value: str | None, name: str) -> str | None:
    if value is not None and (not value.strip() or len(value) > MAX_KEY):
        raise InvalidInput(f"{name} is 1 to {MAX_KEY} characters.", code="invalid_idempotency_key")
    return value.strip() if value else None


def _workflow(workflow_id: str) -> str:
    if len(workflow_id) > MAX_WORKFLOW_ID:
        raise InvalidInput(f"A workflow id is at most {MAX_WORKFLOW_ID} characters.", code="invalid_workflow_id")
    return workflow_id


def _dict(value: Any) -> Any:
    if not isinstance(value, dict):
        raise serializers.ValidationError("An object is expected.")
    return check_json_value(value)


def _event_data(value: Any) -> Any:
    """An event's data holds a whole conversation item (a tool output, an encrypted envelope): its own,
    larger bound (ENGRAM_MAX_EVENT_DATA_BYTES) instead of a fact value's."""
    if not isinstance(value, dict):
        raise serializers.ValidationError("An object is expected.")
    limit = settings.ENGRAM_MAX_EVENT_DATA_BYTES
    if len(json.dumps(value, default=str).encode()) > limit:
        raise serializers.ValidationError(f"The event's data is larger than {limit} bytes.")
    return value


def thread_payload(thread: Thread, scope: Scope) -> dict[str, Any]:
    return {"thread_id": thread.pk, "subject_id": scope.subject_external_id, "title": thread.title,
            "metadata": thread.metadata, "last_seq": thread.last_seq, "created_at": _iso(thread.created_at)}


def event_payload(event: ThreadEvent) -> dict[str, Any]:
    return {"event_id": event.pk, "thread_id": event.thread_id, "seq": event.seq, "kind": event.kind,
            "role": event.role, "text": event.text, "data": event.data, "corrects": event.corrects_id,
            "status": event.status, "idempotency_key": event.idempotency_key, "created_at": _iso(event.created_at),
            "deleted_at": _iso(event.deleted_at)}


def summary_payload(summary: Summary) -> dict[str, Any]:
    return {"summary_id": summary.pk, "thread_id": summary.thread_id, "origin": summary.origin,
            "text": summary.text, "source_range": {"from_seq": summary.from_seq, "to_seq": summary.to_seq},
            "summarizer": {"name": summary.summarizer_name, "version": summary.summarizer_version},
            "created_at": _iso(summary.created_at), "unresolved": summary.unresolved,
            "referenced_event_ids": summary.referenced_event_ids, "status": summary.status,
            "stale_reason": summary.stale_reason or None, "stale_at": _iso(summary.stale_at),
            "replaced_by": summary.replaced_by_id, "regenerates": summary.regenerates_id,
            "content_role": "data"}


def checkpoint_response(checkpoint: Checkpoint, code: int = status.HTTP_200_OK) -> Response:
    response = Response(
        {"workflow_id": checkpoint.workflow_id, "version": checkpoint.version, "thread_id": checkpoint.thread_id,
         "current_step": checkpoint.current_step, "completed_steps": checkpoint.completed_steps,
         "pending_approval": checkpoint.pending_approval, "tool_call_id": checkpoint.tool_call_id,
         "idempotency_key": checkpoint.idempotency_key, "artifacts": checkpoint.artifacts,
         "last_verified_outcome": checkpoint.last_verified_outcome, "created_at": _iso(checkpoint.created_at),
         "updated_at": _iso(checkpoint.updated_at)},
        status=code,
    )
    response["ETag"] = etag(checkpoint.version)
    return response


def tool_call_payload(call: ToolCall, scope: Scope | None = None, sent: tuple[str, ...] = ()) -> dict[str, Any]:
    """The call; answering a write (``scope`` given) to a key without ``read``, its stored content only
    where this request ``sent`` it (a replay's recorded outcome, the arguments a PATCH did not send)."""
    body = {"workflow_id": call.workflow_id, "idempotency_key": call.idempotency_key, "tool": call.tool,
            "arguments": call.arguments, "status": call.status, "outcome": call.outcome,
            "outcome_at": _iso(call.outcome_at), "created_at": _iso(call.created_at),
            "updated_at": _iso(call.updated_at)}
    if scope is not None and not scope.can(READ):
        for name in ("tool", "arguments", "outcome"):
            if name not in sent:
                del body[name]
    return body


class ThreadListCreateApi(APIView):
    @extend_schema_serializer(component_name="ThreadCreate")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        metadata = serializers.JSONField(required=False, default=dict, validators=[_dict],
                                         help_text="Any JSON object.")

    @extend_schema(operation_id="threads_list", tags=[Tags.THREADS], summary="List the subject's threads",
                   parameters=[PageIn], responses={200: ThreadPageOut, **errors(*THREAD_STATE, "invalid")})
    def get(self, request: Request) -> Response:
        filters = PageIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        scope = scope_of(request)
        threads = selectors.thread_list(scope=scope, limit=f["limit"] + 1, offset=f["offset"])
        return Response(page_body(threads, f, lambda t: thread_payload(t, scope)))

    @extend_schema(
        operation_id="thread_create", tags=[Tags.THREADS], summary="Start a thread",
        parameters=[OpenApiParameter(
            "Idempotency-Key", str, OpenApiParameter.HEADER,
            description="Names the thread: the same key and body return the thread created first (200); the same "
                        "key with another body is 409 `idempotency_conflict`.")],
        request=InputSerializer,
        responses={**written(ThreadOut, new="Started.", again="The thread started first with this Idempotency-Key."),
                   **errors(*THREAD_WRITE, "invalid_idempotency_key", "idempotency_conflict")})
    def post(self, request: Request) -> Response:
        data = _validated(self.InputSerializer, request)
        scope = scope_of(request)
        result = thread_create(scope=scope, title=data["title"], metadata=data["metadata"],
                               idempotency_key=_key(request.headers.get("Idempotency-Key"), "Idempotency-Key"))
        return Response(thread_payload(result.thread, scope),
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class ThreadDetailApi(APIView):
    @extend_schema(operation_id="thread_get", tags=[Tags.THREADS], summary="Read a thread",
                   responses={200: ThreadOut, **errors(*THREAD_STATE, "not_found")})
    def get(self, request: Request, thread_id: str) -> Response:
        scope = scope_of(request)
        return Response(thread_payload(selectors.thread_get(scope=scope, thread_id=thread_id), scope))


class ThreadEventsApi(APIView):
    @extend_schema_serializer(component_name="ThreadEvent")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        kind = serializers.ChoiceField(choices=EventKind.choices)
        role = serializers.ChoiceField(choices=ROLES, required=False)  # none: ""
        text = text_field(required=False, allow_blank=True, default="")
        data = serializers.JSONField(required=False, default=dict,  # type: ignore[assignment]
                                     validators=[_event_data], help_text="Any JSON object (a tool output, an "
                                                                         "encrypted envelope).")
        corrects = serializers.CharField(max_length=40, required=False, allow_null=True, default=None,
                                         help_text="An event of this thread that this one corrects (the log is "
                                                   "append-only: a correction is a new event).")

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs["kind"] == EventKind.MESSAGE and not attrs["text"]:
                raise serializers.ValidationError({"text": "A message needs text."})
            return attrs

    class FilterSerializer(serializers.Serializer):
        after = integer(min_value=0, default=0, help_text="Only events with a larger seq.")
        before = integer(min_value=1, required=False, help_text="Only events with a smaller seq.")
        limit = integer(min_value=1, max_value=MAX_EVENTS_PAGE, default=100,
                        help_text="Page size, oldest first from 'after'.")
        tail = integer(min_value=1, max_value=MAX_EVENTS_PAGE, required=False,
                       help_text="The last N events (of those matching), still oldest first; "
                                 "'next_before' pages further back.")
        status = serializers.ChoiceField(choices=ThreadEvent.Status.choices, required=False,
                                         help_text="'recorded' leaves out deleted (blanked) events.")

    @extend_schema(operation_id="thread_events_list", tags=[Tags.THREADS], summary="Read a thread's events",
                   description="In seq order: a page from `after`, or with `tail` the last events (still oldest "
                               "first), paging back with `before`.",
                   parameters=[FilterSerializer],
                   responses={200: EventPageOut, **errors(*THREAD_STATE, "invalid", "not_found")})
    def get(self, request: Request, thread_id: str) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        tail = f.get("tail")
        limit = tail or f["limit"]
        events = selectors.thread_events(scope=scope_of(request), thread_id=thread_id, after=f["after"],
                                         before=f.get("before"), status=f.get("status"), limit=limit + 1,
                                         newest=tail is not None)
        more = len(events) > limit
        if tail is not None:
            page = events[1:] if more else events
            return Response({"thread_id": thread_id, "results": [event_payload(e) for e in page], "next_after": None,
                             "next_before": page[0].seq if more else None})
        return Response({"thread_id": thread_id, "results": [event_payload(e) for e in events[:limit]],
                         "next_after": events[limit - 1].seq if more else None, "next_before": None})

    @extend_schema(
        operation_id="thread_clear", tags=[Tags.THREADS], summary="Clear a thread",
        description="Every event so far is blanked at once (reads skip them from this answer on) and a deletion "
                    "job finishes the derived surfaces and verifies them. Later appends continue the log.",
        request=None, responses={202: ThreadClearedOut, **errors(*THREAD_STATE, "not_found")})
    def delete(self, request: Request, thread_id: str) -> Response:
        result = thread_clear(scope=scope_of(request), thread_id=thread_id)
        url = reverse("api:deletion-detail", kwargs={"deletion_id": result.job.pk})
        return Response({"deletion_id": result.job.pk, "status": result.job.status, "status_url": url,
                         "thread_id": thread_id, "up_to_seq": result.up_to_seq, "cleared": result.cleared},
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="thread_event_append", tags=[Tags.THREADS], summary="Append an event",
        description="The server assigns the next seq. With an Idempotency-Key, a retry returns the original event "
                    "(200).",
        parameters=[IDEMPOTENCY_KEY], request=InputSerializer,
        responses={**written(EventOut, new="Appended.", again="The event appended the first time with this "
                                                                  "Idempotency-Key."),
                   **errors(*THREAD_WRITE, "not_found", "invalid_idempotency_key",
                                                          "unknown_event", "idempotency_conflict", "event_deleted")},
        examples=[OpenApiExample("A user message", request_only=True, value={
                      "kind": "message", "role": "user", "text": "Book me on the 9:40 to Porto."}),
                  OpenApiExample("The appended event", response_only=True, status_codes=[201], value=EVENT_EXAMPLE)])
    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        item = EventInput(kind=data["kind"], role=data.get("role", ""), text=data["text"], data=data["data"],
                          corrects=data["corrects"])
        result = thread_event_append(scope=scope_of(request), thread_id=thread_id, item=item,
                                     idempotency_key=_key(request.headers.get("Idempotency-Key"), "Idempotency-Key"))
        return Response(event_payload(result.event),
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


@extend_schema_serializer(component_name="ThreadBatchEvent")
class EventBatchItemIn(ThreadEventsApi.InputSerializer):
    idempotency_key = serializers.CharField(max_length=MAX_KEY, required=False, allow_null=True, default=None,
                                            help_text="This event's Idempotency-Key.")


@extend_schema_serializer(component_name="EventBatch")
class EventBatchIn(StrictSerializer):
    subject_id = serializers.CharField(max_length=128, required=False)
    events: serializers.ListSerializer = serializers.ListSerializer(
        child=EventBatchItemIn(), min_length=1, max_length=MAX_BATCH,
        help_text=f"1 to {MAX_BATCH} events, appended in this order.")


class ThreadEventBatchApi(APIView):
    ItemSerializer = EventBatchItemIn

    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        events = serializers.ListField(child=serializers.DictField(), allow_empty=False, max_length=MAX_BATCH)

    @extend_schema(
        operation_id="thread_events_append_batch", tags=[Tags.THREADS], summary="Append several events",
        description=f"Up to {MAX_BATCH} events in order, all or none, with consecutive seq numbers (nothing else "
                    "lands in between). Each event may carry its own `idempotency_key`; a replayed batch answers "
                    "200 with the events it created the first time.",
        request=EventBatchIn,
        responses={**written(EventBatchOut, new="Appended.", again="Every event had been appended before."),
                   **errors(*THREAD_WRITE, "not_found", "invalid_idempotency_key", "unknown_event",
                            "idempotency_conflict", "event_deleted", "batch_interrupted")},
        examples=[OpenApiExample("Two turns", request_only=True, value={"events": [
            {"kind": "message", "role": "user", "text": "Book me on the 9:40 to Porto.", "idempotency_key": "t-7"},
            {"kind": "message", "role": "assistant", "text": "Booked: TP123, seat 14C.", "idempotency_key": "t-8"}]})])
    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        items = []
        for index, raw in enumerate(data["events"]):
            check_body_scope(raw, scope_of(request))
            try:
                event = _validated_data(self.ItemSerializer, raw)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"events": {str(index): exc.detail}}) from exc
            items.append((EventInput(kind=event["kind"], role=event.get("role", ""), text=event["text"],
                                     data=event["data"], corrects=event["corrects"]),
                          _key(event["idempotency_key"], "idempotency_key")))
        results = thread_events_append(scope=scope_of(request), thread_id=thread_id, items=items)
        created = sum(1 for r in results if r.created)
        return Response({"thread_id": thread_id, "results": [event_payload(r.event) for r in results],
                         "created": created}, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ThreadEventPopApi(APIView):
    @extend_schema_serializer(component_name="EventPop")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)

    @extend_schema(
        operation_id="thread_event_pop", tags=[Tags.THREADS], summary="Take the last event off",
        description="The answer holds the last recorded event's content; the row is blanked in place (like "
                    "DELETE of the event). `event` is null when no recorded event is left. Not idempotent: a "
                    "retried pop takes the next event. Needs the `read` scope as well as `write`.",
        request=InputSerializer, responses={200: PopOut, **errors(*BODY, *THREAD_STATE, "scope_mismatch", "not_found")})
    def post(self, request: Request, thread_id: str) -> Response:
        _validated(self.InputSerializer, request)
        event = thread_event_pop(scope=scope_of(request), thread_id=thread_id)
        return Response({"thread_id": thread_id, "event": event_payload(event) if event else None})


class ThreadEventDetailApi(APIView):
    @extend_schema(operation_id="thread_event_get", tags=[Tags.THREADS], summary="Read one event",
                   responses={200: EventOut, **errors(*THREAD_STATE, "not_found")})
    def get(self, request: Request, thread_id: str, event_id: str) -> Response:
        event = selectors.thread_event_get(scope=scope_of(request), thread_id=thread_id, event_id=event_id)
        return Response(event_payload(event))

    @extend_schema(operation_id="thread_event_delete", tags=[Tags.THREADS, Tags.DELETION],
                   summary="Delete an event's content",
                   description="Synchronous: the content is blanked in place (the row and its seq stay) and the "
                               "summaries over it are stale when this returns. Idempotent.",
                   responses={200: DeletedEventOut, **errors(*THREAD_STATE, "not_found")})
    def delete(self, request: Request, thread_id: str, event_id: str) -> Response:
        event, stale = thread_event_delete(scope=scope_of(request), thread_id=thread_id, event_id=event_id)
        return Response({**event_payload(event), "stale_summaries": stale})


class ThreadSummariesApi(APIView):
    @extend_schema_serializer(component_name="ClientSummary")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        text = text_field()
        from_seq = integer(min_value=1)
        to_seq = integer(min_value=1)
        unresolved = serializers.ListField(child=serializers.JSONField(), required=False, default=list,
                                           max_length=100, validators=[check_json_value])
        referenced_event_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                                     default=list, max_length=1000)
        summarizer = serializers.DictField(child=serializers.CharField(max_length=100), required=False,
                                           help_text="`{\"name\", \"version\"}` of what wrote it (default `client`).")

    @extend_schema(operation_id="thread_summaries_list", tags=[Tags.THREADS], summary="A thread's summaries",
                   description="Fresh and stale, with their ranges.",
                   responses={200: SummaryListOut, **errors(*THREAD_STATE, "not_found")})
    def get(self, request: Request, thread_id: str) -> Response:
        summaries = selectors.summaries_of(scope=scope_of(request), thread_id=thread_id)
        return Response({"thread_id": thread_id, "results": [summary_payload(s) for s in summaries]})

    @extend_schema(operation_id="thread_summary_store", tags=[Tags.THREADS], summary="Store a client summary",
                   description="A summary the client wrote, of the events `from_seq..to_seq`. It is never "
                               "regenerated: when its sources change it goes stale with a reason.",
                   request=InputSerializer,
                   responses={201: SummaryOut, **errors(*THREAD_WRITE, "not_found", "invalid_range", "unknown_event")})
    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        summarizer = data.get("summarizer") or {}
        item = ClientSummaryInput(text=data["text"], from_seq=data["from_seq"], to_seq=data["to_seq"],
                                  unresolved=data["unresolved"], referenced_event_ids=data["referenced_event_ids"],
                                  summarizer_name=summarizer.get("name", "client"),
                                  summarizer_version=summarizer.get("version", ""))
        summary = summary_store(scope=scope_of(request), thread_id=thread_id, item=item)
        return Response(summary_payload(summary), status=status.HTTP_201_CREATED)


class ThreadSummarizeApi(APIView):
    @extend_schema_serializer(component_name="Summarize")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        from_seq = integer(min_value=1, required=False)
        to_seq = integer(min_value=1, required=False)

    @extend_schema(
        operation_id="thread_summarize", tags=[Tags.THREADS], summary="Summarize a thread",
        description="A server summary of `from_seq..to_seq` (default: the whole thread so far), by the configured "
                    "summarizer (an extractive one unless a model service is configured). Needs the `read` scope as "
                    "well as `write`: the answer is a summary of stored events.",
        request=InputSerializer,
        responses={201: SummaryOut, **errors(*BODY, *THREAD_STATE, "scope_mismatch", "not_found", "invalid_range",
                                             "thread_busy", "summarizer_unavailable")})
    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        summary = thread_summarize(scope=scope_of(request), thread_id=thread_id, from_seq=data.get("from_seq"),
                                   to_seq=data.get("to_seq"))
        return Response(summary_payload(summary), status=status.HTTP_201_CREATED)


class ThreadSummaryApi(APIView):
    @extend_schema(operation_id="thread_summary_latest", tags=[Tags.THREADS], summary="The latest fresh summary",
                   responses={200: SummaryOut, **errors(*THREAD_STATE, "not_found", "no_fresh_summary")})
    def get(self, request: Request, thread_id: str) -> Response:
        return Response(summary_payload(selectors.summary_latest_fresh(scope=scope_of(request), thread_id=thread_id)))


class CheckpointApi(APIView):
    @extend_schema_serializer(component_name="Checkpoint")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        thread_id = serializers.CharField(max_length=40, required=False, allow_null=True, default=None)
        current_step = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        completed_steps = serializers.ListField(child=serializers.JSONField(), required=False, default=list,
                                                max_length=1000, validators=[check_json_value])
        pending_approval = serializers.JSONField(required=False, allow_null=True, default=None,
                                                 validators=[check_json_value])
        tool_call_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        idempotency_key = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        artifacts = serializers.JSONField(required=False, default=dict, validators=[_dict])
        last_verified_outcome = serializers.JSONField(required=False, allow_null=True, default=None,
                                                      validators=[check_json_value])

    @extend_schema(operation_id="checkpoint_get", tags=[Tags.WORKFLOWS], summary="Resume a workflow",
                   description="The workflow's checkpoint, with its version as the ETag.", parameters=[ETAG],
                   responses={200: CheckpointOut, **errors(*THREAD_STATE, "invalid_workflow_id", "not_found")},
                   examples=[OpenApiExample("A checkpoint", response_only=True, value=CHECKPOINT_EXAMPLE)])
    def get(self, request: Request, workflow_id: str) -> Response:
        scope = scope_of(request)
        return checkpoint_response(selectors.checkpoint_get(scope=scope, workflow_id=_workflow(workflow_id)))

    @extend_schema(
        operation_id="checkpoint_put", tags=[Tags.WORKFLOWS], summary="Save a workflow's checkpoint",
        description='Optimistic concurrency: `If-None-Match: *` creates the first checkpoint (201); after that '
                    '`If-Match: "<version>"` from the ETag you read replaces it (200). A stale version is 412 and '
                    "nothing is written; no precondition is 428.",
        parameters=[IF_MATCH, IF_NONE_MATCH, ETAG], request=InputSerializer,
        responses={**written(CheckpointOut, new="The first checkpoint (If-None-Match: *).",
                             again="The checkpoint replaced (If-Match matched)."),
                   **errors(*THREAD_WRITE, "invalid_workflow_id", "invalid_precondition", "unknown_thread",
                            "precondition_failed", "precondition_required")},
        examples=[OpenApiExample("The next step", request_only=True, value={
                      "thread_id": EVENT_EXAMPLE["thread_id"], "current_step": "pay",
                      "completed_steps": ["search", "choose_flight"], "artifacts": {"flight": "TP123"}}),
                  OpenApiExample("The saved checkpoint", response_only=True, status_codes=[200],
                                 value=CHECKPOINT_EXAMPLE)])
    def put(self, request: Request, workflow_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        data.pop("subject_id", None)
        checkpoint, created = checkpoint_put(
            scope=scope_of(request), workflow_id=_workflow(workflow_id), state=CheckpointState(**data),
            if_match=request.headers.get("If-Match"), if_none_match=request.headers.get("If-None-Match"))
        return checkpoint_response(checkpoint, status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ToolCallCreateApi(APIView):
    @extend_schema_serializer(component_name="ToolCall")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        idempotency_key = serializers.CharField(max_length=MAX_KEY)
        tool = serializers.CharField(max_length=200)
        arguments = serializers.JSONField(required=False, default=dict, validators=[_dict],
                                          help_text="Any JSON object.")

    @extend_schema(
        operation_id="tool_call_record", tags=[Tags.WORKFLOWS], summary="Record a tool call before it runs",
        description="Record the call *before* its side effect; the key makes a retry return the same call (200). "
                    "The same key with other arguments is 409.",
        request=InputSerializer,
        responses={**written(ToolCallOut, new="Recorded.", again="The call recorded the first time with this key."),
                   **errors(*THREAD_WRITE, "invalid_workflow_id",
                                                                "idempotency_conflict")})
    def post(self, request: Request, workflow_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        call, created = tool_call_record(scope=scope_of(request), workflow_id=_workflow(workflow_id),
                                         idempotency_key=data["idempotency_key"], tool=data["tool"],
                                         arguments=data["arguments"])
        return Response(tool_call_payload(call, scope_of(request), sent=("tool", "arguments")),
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ToolCallDetailApi(APIView):
    @extend_schema_serializer(component_name="ToolCallOutcome")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        status = serializers.ChoiceField(choices=[ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED])
        outcome = serializers.JSONField(allow_null=True, validators=[check_json_value],
                                        help_text="The verified outcome, any JSON.")

    @extend_schema(operation_id="tool_call_get", tags=[Tags.WORKFLOWS], summary="What happened to a tool call",
                   description="404: never attempted; `pending`: verify with the tool's system; `succeeded` or "
                               "`failed`: known.",
                   responses={200: ToolCallOut, **errors(*THREAD_STATE, "invalid_workflow_id", "not_found")})
    def get(self, request: Request, workflow_id: str, key: str) -> Response:
        call = selectors.tool_call_get(scope=scope_of(request), workflow_id=_workflow(workflow_id), key=key)
        return Response(tool_call_payload(call))

    @extend_schema(operation_id="tool_call_complete", tags=[Tags.WORKFLOWS], summary="Record a tool call's outcome",
                   request=InputSerializer,
                   responses={200: ToolCallOut, **errors(*THREAD_WRITE, "invalid_workflow_id", "not_found",
                                                         "outcome_already_recorded")})
    def patch(self, request: Request, workflow_id: str, key: str) -> Response:
        data = _validated(self.InputSerializer, request)
        call, _ = tool_call_complete(scope=scope_of(request), workflow_id=_workflow(workflow_id),
                                     idempotency_key=key, status=data["status"], outcome=data["outcome"])
        return Response(tool_call_payload(call, scope_of(request), sent=("outcome",)))
