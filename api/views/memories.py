"""Write paths and record reads: /memories, /outcomes, /candidates."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.fields import (
    NameField,
    NamespaceField,
    StrictSerializer,
    check_body_scope,
    check_json_value,
    integer,
    text_field,
)
from api.serializers import record_payload
from memory.content import unseal_parts
from memory.ids import new_event_id
from memory.models import MemoryType, RecordStatus, SourceType
from memory.selectors import memory_get, memory_history, memory_list
from memory.services.writes import RecordInput, candidate_submit, memory_write, outcome_record


class FactIn(StrictSerializer):
    field = NameField()
    value = serializers.JSONField(validators=[check_json_value])


class ReferenceIn(StrictSerializer):
    system = serializers.CharField(max_length=100)
    id = serializers.CharField(max_length=200)


class SourceIn(StrictSerializer):
    type = serializers.CharField(max_length=32, required=False)
    event_id = serializers.CharField(max_length=128, required=False)
    text = text_field(required=False, help_text="The words or observation the write came from (evidence).")
    occurred_at = serializers.DateTimeField(required=False)


class RecordIn(StrictSerializer):
    subject_id = serializers.CharField(max_length=128, required=False)
    namespace = NamespaceField()
    kind = NameField()
    type = serializers.ChoiceField(choices=MemoryType.choices, default=MemoryType.SEMANTIC)
    fact = FactIn()
    text = text_field(required=False)
    source = SourceIn(required=False)  # type: ignore[assignment]
    valid_from = serializers.DateTimeField(required=False)
    valid_until = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("valid_from") and attrs.get("valid_until") and attrs["valid_until"] <= attrs["valid_from"]:
            raise serializers.ValidationError({"valid_until": "valid_until must be after valid_from."})
        return attrs


class OutcomeIn(RecordIn):
    fact = FactIn(required=False)
    field = NameField(required=False, help_text="The fact's field when a reference is given instead of a state.")
    reference = ReferenceIn(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if ("fact" in attrs) == ("reference" in attrs):
            raise serializers.ValidationError("Give either the verified state as 'fact' or a 'reference'.")
        if "reference" in attrs and "field" not in attrs:
            raise serializers.ValidationError({"field": "A reference needs the field it stands for."})
        return attrs


class CandidateIn(RecordIn):
    evidence = serializers.ListField(child=serializers.DictField(), required=False, max_length=20)
    confidence = serializers.FloatField(required=False, min_value=0, max_value=1)


def to_record_input(data: dict[str, Any], *, default_source: str) -> RecordInput:
    source = data.get("source", {})
    fact = data.get("fact") or {"field": data["field"], "value": None}
    reference = data.get("reference")
    text = data.get("text") or _default_text(fact["field"], fact["value"], reference)
    return RecordInput(
        namespace=data["namespace"], kind=data["kind"], field=fact["field"], value=fact["value"], text=text,
        event_id=source.get("event_id") or new_event_id(), source_type=source.get("type") or default_source,
        memory_type=data.get("type", MemoryType.SEMANTIC), event_text=source.get("text", ""),
        occurred_at=source.get("occurred_at"), valid_from=data.get("valid_from"),
        valid_until=data.get("valid_until"), source_ref=dict(reference) if reference else None,
    )


def _default_text(field: str, value: Any, reference: dict[str, Any] | None) -> str:
    # Deterministic, never a paraphrase: the field and the verbatim value (or the reference).
    if reference:
        return f"{field}: see {reference['system']} {reference['id']}"
    return f"{field}: {value}"


def _validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    check_body_scope(request.data, scope_of(request))
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class MemoryListCreateApi(APIView):
    class FilterIn(serializers.Serializer):
        namespace = NamespaceField(required=False)
        kind = NameField(required=False)
        status = serializers.ChoiceField(choices=RecordStatus.choices, required=False)
        limit = integer(min_value=1, max_value=200, default=50)
        offset = integer(min_value=0, default=0)

    def get(self, request: Request) -> Response:
        filters = self.FilterIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        records = memory_list(scope=scope_of(request), namespace=f.get("namespace"), kind=f.get("kind"),
                              status=f.get("status"))
        page = list(records[f["offset"]: f["offset"] + f["limit"] + 1])
        more = len(page) > f["limit"]
        return Response({"results": [record_payload(r) for r in page[: f["limit"]]],
                         "next_offset": f["offset"] + f["limit"] if more else None})

    def post(self, request: Request) -> Response:
        data = _validated(RecordIn, request)
        result = memory_write(scope=scope_of(request),
                              item=to_record_input(data, default_source=SourceType.EXPLICIT_USER_STATEMENT))
        return _write_response(result)


def _write_response(result: Any) -> Response:
    body: dict[str, Any] = dict(record_payload(result.record))
    if result.decision is not None:
        body["policy"] = {"outcome": result.decision.outcome.value, "reason": result.decision.reason}
        if result.conflict_with:
            body["policy"]["conflict_with"] = result.conflict_with
    return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class MemoryDetailApi(APIView):
    def get(self, request: Request, memory_id: str) -> Response:
        return Response(record_payload(memory_get(scope=scope_of(request), memory_id=memory_id)))

    def delete(self, request: Request, memory_id: str) -> Response:
        # 202 {"deletion_id", "status", "status_url"}; the deletion area runs the job (api/views/deletion.py).
        from api.views.deletion import accepted
        from memory.deletion.services import memory_delete

        return accepted(memory_delete(scope=scope_of(request), memory_id=memory_id))


class MemoryHistoryApi(APIView):
    def get(self, request: Request, memory_id: str) -> Response:
        chain = memory_history(scope=scope_of(request), memory_id=memory_id)
        return Response({"memory_id": memory_id, "history": [record_payload(r) for r in chain]})


class OutcomeCreateApi(APIView):
    def post(self, request: Request) -> Response:
        data = _validated(OutcomeIn, request)
        item = to_record_input(data, default_source=SourceType.VERIFIED_OUTCOME)
        return _write_response(outcome_record(scope=scope_of(request), item=item))


class CandidateCreateApi(APIView):
    def post(self, request: Request) -> Response:
        data = _validated(CandidateIn, request)
        item = to_record_input(data, default_source=SourceType.MODEL_INFERRED)
        result = candidate_submit(scope=scope_of(request), item=item, evidence=data.get("evidence"),
                                  model_confidence=data.get("confidence"))
        c = result.candidate
        fact, text = unseal_parts(c.fact, c.text)
        return Response(
            {"candidate_id": c.pk, "status": c.status, "subject_id": scope_of(request).subject_external_id,
             "namespace": c.namespace.split("/"), "kind": c.kind, "fact": fact, "text": text,
             "source": {"type": SourceType.MODEL_INFERRED, "event_id": item.event_id},
             "confidence": "candidate", "created_at": c.created_at.isoformat()},
            status=status.HTTP_202_ACCEPTED if result.created else status.HTTP_200_OK,
        )
