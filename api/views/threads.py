"""Thread state: /threads (events, summaries) and /workflows (checkpoints, tool calls)."""

from __future__ import annotations

from typing import Any

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
from memory.threads.services.events import EventInput, thread_create, thread_event_append, thread_event_delete
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
ROLES = ["user", "assistant", "system", "tool"]


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def _validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    check_body_scope(request.data, scope_of(request))
    serializer = serializer_class(data=request.data)
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

    def post(self, request: Request) -> Response:
        data = _validated(self.InputSerializer, request)
        scope = scope_of(request)
        thread = thread_create(scope=scope, title=data["title"], metadata=data["metadata"])
        return Response(thread_payload(thread, scope), status=status.HTTP_201_CREATED)


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
        data = serializers.JSONField(required=False, default=dict, validators=[_dict])  # type: ignore[assignment]
        corrects = serializers.CharField(max_length=40, required=False, allow_null=True, default=None)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs["kind"] == EventKind.MESSAGE and not attrs["text"]:
                raise serializers.ValidationError({"text": "A message needs text."})
            return attrs

    class FilterSerializer(serializers.Serializer):
        after = integer(min_value=0, default=0)
        limit = integer(min_value=1, max_value=500, default=100)

    def get(self, request: Request, thread_id: str) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        after, limit = filters.validated_data["after"], filters.validated_data["limit"]
        events = selectors.thread_events(scope=scope_of(request), thread_id=thread_id, after=after, limit=limit + 1)
        more = len(events) > limit
        return Response({"thread_id": thread_id, "results": [event_payload(e) for e in events[:limit]],
                         "next_after": events[limit - 1].seq if more else None})

    def post(self, request: Request, thread_id: str) -> Response:
        data = _validated(self.InputSerializer, request)
        item = EventInput(kind=data["kind"], role=data["role"], text=data["text"], data=data["data"],
                          corrects=data["corrects"])
        result = thread_event_append(scope=scope_of(request), thread_id=thread_id, item=item,
                                     idempotency_key=_key(request.headers.get("Idempotency-Key"), "Idempotency-Key"))
        return Response(event_payload(result.event),
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


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
