"""Record writes and reads: /memories, /memories/batch, /memories/{id}/correct, /outcomes, /candidates."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.exceptions import _sentence, record_refusals
from api.fields import (
    NameField,
    NamespaceField,
    StrictSerializer,
    check_body_scope,
    check_json_value,
    item_problem,
    text_field,
)
from api.paging import PageIn, page_body, window
from memory.content import unseal_parts
from memory.errors import EngramError, InvalidInput
from memory.ids import new_event_id
from memory.models import MemoryType, RecordStatus, SourceType
from memory.records.presenters import record_payload
from memory.records.selectors import memory_get, memory_history, memory_list
from memory.records.services import (
    MAX_BATCH,
    OUTCOME_SOURCE_TYPES,
    ItemResult,
    RecordInput,
    WriteResult,
    candidate_submit,
    memory_correct,
    memory_write,
    memory_write_batch,
    outcome_record,
)


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
    class FilterIn(PageIn):
        namespace = NamespaceField(required=False)
        kind = NameField(required=False)
        status = serializers.ChoiceField(choices=RecordStatus.choices, required=False)

    def get(self, request: Request) -> Response:
        filters = self.FilterIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        records = memory_list(scope=scope_of(request), namespace=f.get("namespace"), kind=f.get("kind"),
                              status=f.get("status"))
        return Response(page_body(list(records[window(f)]), f, record_payload))

    def post(self, request: Request) -> Response:
        data = _validated(RecordIn, request)
        result = memory_write(scope=scope_of(request),
                              item=to_record_input(data, default_source=SourceType.EXPLICIT_USER_STATEMENT))
        return _write_response(result)


def _policy(result: WriteResult) -> dict[str, Any]:
    """How precedence placed a new record (nothing for a replay)."""
    if result.decision is None:
        return {}
    policy: dict[str, Any] = {"outcome": result.decision.outcome.value, "reason": result.decision.reason}
    if result.conflict_with:
        policy["conflict_with"] = result.conflict_with
    return {"policy": policy}


def _write_response(result: WriteResult) -> Response:
    body: dict[str, Any] = {**record_payload(result.record), **_policy(result)}
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


class MemoryCorrectApi(APIView):
    class FactIn(StrictSerializer):
        field = serializers.CharField(max_length=128, required=False)
        value = serializers.JSONField(validators=[check_json_value])

    class SourceIn(StrictSerializer):
        type = serializers.ChoiceField(choices=["explicit_user_statement"], required=False,
                                       help_text="A correction is always the user's explicit statement.")
        event_id = serializers.CharField(max_length=128, required=False,
                                         help_text="Idempotency key: a retry with the same id returns the same "
                                                   "correction.")
        text = text_field(required=False, help_text="The words the correction came from.")

    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        fact = serializers.DictField(required=False)
        text = text_field(required=False)
        source = serializers.DictField(required=False)  # type: ignore[assignment]

    def post(self, request: Request, memory_id: str) -> Response:
        scope = scope_of(request)
        check_body_scope(request.data, scope)
        data = _valid(self.InputSerializer, request.data)
        fact = _valid(self.FactIn, data["fact"]) if "fact" in data else None
        if fact is None and not data.get("text"):
            raise exceptions.ValidationError({"fact": "Give the corrected fact (and/or text)."})
        source = _valid(self.SourceIn, data["source"]) if "source" in data else {}
        result = memory_correct(scope=scope, memory_id=memory_id, value=fact["value"] if fact else None,
                                text=data.get("text", ""), event_text=source.get("text", ""),
                                event_id=source.get("event_id"))
        body: dict[str, Any] = dict(record_payload(result.record))
        body["corrects"] = result.previous.pk
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class MemoryBatchApi(APIView):
    """POST /memories/batch: up to 500 explicit statements or outcomes, one result per item."""

    per_item_fields = ("items",)  # the body parser leaves these to BatchItemParser: one error per bad item

    class InputSerializer(StrictSerializer):
        items = serializers.ListField(child=serializers.DictField(), allow_empty=False)
        # "worker" (default): embeddings are filled behind by the worker, the call returns at once.
        # "now": computed in this call in one batched model call, stored with the rows.
        embed = serializers.ChoiceField(choices=["worker", "now"], default="worker")

    def post(self, request: Request) -> Response:
        scope = scope_of(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        raw = serializer.validated_data["items"]
        if len(raw) > MAX_BATCH:
            raise InvalidInput(f"A batch holds at most {MAX_BATCH} items; got {len(raw)}.", code="batch_too_large")
        parser = BatchItemParser(scope)
        parsed = [parser.parse(item) for item in raw]
        valid = [(i, p) for i, p in enumerate(parsed) if isinstance(p, RecordInput)]
        written = memory_write_batch(scope=scope, items=[p for _, p in valid],
                                     embed_now=serializer.validated_data["embed"] == "now")
        results: list[dict[str, Any]] = [
            _error(i, p) for i, p in enumerate(parsed) if isinstance(p, EngramError)]
        record_refusals(request, [p for p in parsed if isinstance(p, EngramError)]
                        + [r.error for r in written if r.error is not None])
        results.extend(_result(i, r) for (i, _), r in zip(valid, written, strict=True))
        results.sort(key=lambda r: r["index"])
        counts = {s: sum(1 for r in results if r["status"] == s) for s in ("created", "existing", "error")}
        return Response({"results": results, **counts})


class BatchItemParser:
    """Validates items with the single-write serializers (an outcome when it says so, else a statement).

    One serializer instance per kind is reused for every item: DRF deep-copies the declared fields
    each time a serializer is instantiated, which cost more than the validation itself at 500 items."""

    def __init__(self, scope: Any) -> None:
        self.scope = scope
        self.statement = RecordIn()
        self.outcome = OutcomeIn()

    def parse(self, item: dict[str, Any]) -> RecordInput | EngramError:
        given = item.get("source")
        source: dict[str, Any] = given if isinstance(given, dict) else {}
        is_outcome = "reference" in item or source.get("type") in OUTCOME_SOURCE_TYPES
        problem = item_problem(item)
        if problem is not None:
            return problem
        try:
            check_body_scope(item, self.scope)
            data = (self.outcome if is_outcome else self.statement).run_validation(item)
        except EngramError as exc:
            return exc
        except ValidationError as exc:
            return InvalidInput(_sentence(exc.detail))
        default = SourceType.VERIFIED_OUTCOME if is_outcome else SourceType.EXPLICIT_USER_STATEMENT
        return to_record_input(data, default_source=default)


def _error(index: int, exc: EngramError) -> dict[str, Any]:
    return {"index": index, "status": "error", "http_status": exc.status, "code": exc.code, "detail": exc.detail}


def _result(index: int, result: ItemResult) -> dict[str, Any]:
    written = result.written
    if result.error is not None or written is None:
        return _error(index, result.error or InvalidInput("The item was not written."))
    return {"index": index, "status": result.status, "http_status": 201 if written.created else 200,
            "memory_id": written.record.pk, "record": record_payload(written.record), **_policy(written)}
