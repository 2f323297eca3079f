"""Thread state: /threads (events, summaries) and /workflows (checkpoints, tool calls)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.fields import StrictSerializer, check_body_scope, check_json_value, integer, text_field
from api.paging import PageIn, page_body
from memory.errors import InvalidInput
from memory.scope import Scope
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


class EventOut(serializers.Serializer):
    """One thread event as every events endpoint returns it (documentation of the payload)."""

    event_id = serializers.CharField()
    thread_id = serializers.CharField()
    seq = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=EventKind.choices)
    role = serializers.CharField()
    text = serializers.CharField()
    data = serializers.JSONField()  # type: ignore[assignment]
    corrects = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=ThreadEvent.Status.choices)
    idempotency_key = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    deleted_at = serializers.DateTimeField(allow_null=True)


class EventPageOut(serializers.Serializer):
    thread_id = serializers.CharField()
    results = EventOut(many=True)
    next_after = serializers.IntegerField(allow_null=True, help_text="Pass as 'after' for the next page.")
    next_before = serializers.IntegerField(allow_null=True, help_text="Pass as 'before' (with 'tail') for older.")


class EventBatchOut(serializers.Serializer):
    thread_id = serializers.CharField()
    results = EventOut(many=True)
    created = serializers.IntegerField(help_text="How many events this call created (0: a replay).")


class PopOut(serializers.Serializer):
    thread_id = serializers.CharField()
    event = EventOut(allow_null=True, help_text="The event taken off the log, with its content; null if none.")


class DeletionAcceptedOut(serializers.Serializer):
    deletion_id = serializers.CharField()
    status = serializers.CharField()
    status_url = serializers.CharField()
    thread_id = serializers.CharField()
    up_to_seq = serializers.IntegerField(help_text="Events up to this seq were cleared.")
    cleared = serializers.IntegerField(help_text="How many recorded events were blanked.")


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


def tool_call_payload(call: ToolCall) -> dict[str, Any]:
    return {"workflow_id": call.workflow_id, "idempotency_key": call.idempotency_key, "tool": call.tool,
            "arguments": call.arguments, "status": call.status, "outcome": call.outcome,
            "outcome_at": _iso(call.outcome_at), "created_at": _iso(call.created_at),
            "updated_at": _iso(call.updated_at)}


class ThreadListCreateApi(APIView):
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        metadata = serializers.JSONField(required=False, default=dict, validators=[_dict])

    def get(self, request: Request) -> Response:
        filters = PageIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        scope = scope_of(request)
        threads = selectors.thread_list(scope=scope, limit=f["limit"] + 1, offset=f["offset"])
        return Response(page_body(threads, f, lambda t: thread_payload(t, scope)))

    @extend_schema(parameters=[OpenApiParameter(
        "Idempotency-Key", location=OpenApiParameter.HEADER, required=False,
        description="Names the thread: the same key and body return the thread created first (200); the same "
                    "key with another body is 409 idempotency_conflict.")])
    def post(self, request: Request) -> Response:
        data = _validated(self.InputSerializer, request)
        scope = scope_of(request)
        result = thread_create(scope=scope, title=data["title"], metadata=data["metadata"],
                               idempotency_key=_key(request.headers.get("Idempotency-Key"), "Idempotency-Key"))
        return Response(thread_payload(result.thread, scope),
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class ThreadDetailApi(APIView):
    def get(self, request: Request, thread_id: str) -> Response:
        scope = scope_of(request)
        return Response(thread_payload(selectors.thread_get(scope=scope, thread_id=thread_id), scope))


class ThreadEventsApi(APIView):
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        kind = serializers.ChoiceField(choices=EventKind.choices)
        role = serializers.ChoiceField(choices=ROLES, required=False, default="")
        text = text_field(required=False, allow_blank=True, default="")
        data = serializers.JSONField(required=False, default=dict,  # type: ignore[assignment]
                                     validators=[_event_data])
        corrects = serializers.CharField(max_length=40, required=False, allow_null=True, default=None)

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

    @extend_schema(parameters=[FilterSerializer], responses=EventPageOut)
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

    @extend_schema(responses={202: DeletionAcceptedOut})
    def delete(self, request: Request, thread_id: str) -> Response:
        """Clear the thread: every event so far is blanked at once (reads skip it from this response on) and a
        deletion job finishes the derived surfaces and verifies them. Later appends continue the log."""
        result = thread_clear(scope=scope_of(request), thread_id=thread_id)
        url = reverse("api:deletion-detail", kwargs={"deletion_id": result.job.pk})
        return Response({"deletion_id": result.job.pk, "status": result.job.status, "status_url": url,
                         "thread_id": thread_id, "up_to_seq": result.up_to_seq, "cleared": result.cleared},
                        status=status.HTTP_202_ACCEPTED)

    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        item = EventInput(kind=data["kind"], role=data["role"], text=data["text"], data=data["data"],
                          corrects=data["corrects"])
        result = thread_event_append(scope=scope_of(request), thread_id=thread_id, item=item,
                                     idempotency_key=_key(request.headers.get("Idempotency-Key"), "Idempotency-Key"))
        return Response(event_payload(result.event),
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class ThreadEventBatchApi(APIView):
    class ItemSerializer(ThreadEventsApi.InputSerializer):
        idempotency_key = serializers.CharField(max_length=MAX_KEY, required=False, allow_null=True, default=None,
                                                help_text="This event's Idempotency-Key.")

    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        events = serializers.ListField(child=serializers.DictField(), allow_empty=False, max_length=MAX_BATCH)

    @extend_schema(request=InputSerializer, responses={201: EventBatchOut, 200: EventBatchOut})
    def post(self, request: Request, thread_id: str) -> Response:
        """Append up to 100 events in order, all or none, with consecutive seq numbers (nothing else lands in
        between). Each event may carry its own idempotency_key; a replayed batch answers 200 with the events
        it created the first time."""
        data = _validated(self.InputSerializer, request)
        items = []
        for index, raw in enumerate(data["events"]):
            check_body_scope(raw, scope_of(request))
            try:
                event = _validated_data(self.ItemSerializer, raw)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"events": {str(index): exc.detail}}) from exc
            items.append((EventInput(kind=event["kind"], role=event["role"], text=event["text"], data=event["data"],
                                     corrects=event["corrects"]),
                          _key(event["idempotency_key"], "idempotency_key")))
        results = thread_events_append(scope=scope_of(request), thread_id=thread_id, items=items)
        created = sum(1 for r in results if r.created)
        return Response({"thread_id": thread_id, "results": [event_payload(r.event) for r in results],
                         "created": created}, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ThreadEventPopApi(APIView):
    @extend_schema(request=None, responses=PopOut)
    def post(self, request: Request, thread_id: str) -> Response:
        """Take the last recorded event off the log: the answer holds its content, the row is blanked in place
        (like DELETE of the event). 'event' is null when no recorded event is left. Not idempotent: a retried
        pop takes the next event."""
        event = thread_event_pop(scope=scope_of(request), thread_id=thread_id)
        return Response({"thread_id": thread_id, "event": event_payload(event) if event else None})


class ThreadEventDetailApi(APIView):
    def get(self, request: Request, thread_id: str, event_id: str) -> Response:
        event = selectors.thread_event_get(scope=scope_of(request), thread_id=thread_id, event_id=event_id)
        return Response(event_payload(event))

    def delete(self, request: Request, thread_id: str, event_id: str) -> Response:
        """Synchronous: the content is gone and the summaries over it are stale when this returns."""
        event, stale = thread_event_delete(scope=scope_of(request), thread_id=thread_id, event_id=event_id)
        return Response({**event_payload(event), "stale_summaries": stale})


class ThreadSummariesApi(APIView):
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        text = text_field()
        from_seq = integer(min_value=1)
        to_seq = integer(min_value=1)
        unresolved = serializers.ListField(child=serializers.JSONField(), required=False, default=list,
                                           max_length=100, validators=[check_json_value])
        referenced_event_ids = serializers.ListField(child=serializers.CharField(max_length=40), required=False,
                                                     default=list, max_length=1000)
        summarizer = serializers.DictField(child=serializers.CharField(max_length=100), required=False)

    def get(self, request: Request, thread_id: str) -> Response:
        summaries = selectors.summaries_of(scope=scope_of(request), thread_id=thread_id)
        return Response({"thread_id": thread_id, "results": [summary_payload(s) for s in summaries]})

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
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        from_seq = integer(min_value=1, required=False)
        to_seq = integer(min_value=1, required=False)

    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        summary = thread_summarize(scope=scope_of(request), thread_id=thread_id, from_seq=data.get("from_seq"),
                                   to_seq=data.get("to_seq"))
        return Response(summary_payload(summary), status=status.HTTP_201_CREATED)


class ThreadSummaryApi(APIView):
    def get(self, request: Request, thread_id: str) -> Response:
        return Response(summary_payload(selectors.summary_latest_fresh(scope=scope_of(request), thread_id=thread_id)))


class CheckpointApi(APIView):
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

    def get(self, request: Request, workflow_id: str) -> Response:
        scope = scope_of(request)
        return checkpoint_response(selectors.checkpoint_get(scope=scope, workflow_id=_workflow(workflow_id)))

    def put(self, request: Request, workflow_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        data.pop("subject_id", None)
        checkpoint, created = checkpoint_put(
            scope=scope_of(request), workflow_id=_workflow(workflow_id), state=CheckpointState(**data),
            if_match=request.headers.get("If-Match"), if_none_match=request.headers.get("If-None-Match"))
        return checkpoint_response(checkpoint, status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ToolCallCreateApi(APIView):
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        idempotency_key = serializers.CharField(max_length=MAX_KEY)
        tool = serializers.CharField(max_length=200)
        arguments = serializers.JSONField(required=False, default=dict, validators=[_dict])

    def post(self, request: Request, workflow_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        call, created = tool_call_record(scope=scope_of(request), workflow_id=_workflow(workflow_id),
                                         idempotency_key=data["idempotency_key"], tool=data["tool"],
                                         arguments=data["arguments"])
        return Response(tool_call_payload(call), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ToolCallDetailApi(APIView):
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        status = serializers.ChoiceField(choices=[ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED])
        outcome = serializers.JSONField(allow_null=True, validators=[check_json_value])

    def get(self, request: Request, workflow_id: str, key: str) -> Response:
        call = selectors.tool_call_get(scope=scope_of(request), workflow_id=_workflow(workflow_id), key=key)
        return Response(tool_call_payload(call))

    def patch(self, request: Request, workflow_id: str, key: str) -> Response:
        data = _validated(self.InputSerializer, request)
        call, _ = tool_call_complete(scope=scope_of(request), workflow_id=_workflow(workflow_id),
                                     idempotency_key=key, status=data["status"], outcome=data["outcome"])
        return Response(tool_call_payload(call))
