"""Record writes and reads: /memories, /memories/batch, /memories/{id}/correct, /outcomes, /candidates."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.exceptions import record_refusals
from api.fields import (
    NameField,
    NamespacePathField,
    StrictSerializer,
    check_body_scope,
    check_json_value,
    text_field,
)
from api.openapi import AGENT, BODY, Tags, errors, written
from api.paging import PageIn, page_body, window
from api.record_input import BatchItemParser, CandidateIn, MemoryBatchItemIn, OutcomeIn, RecordIn, to_record_input
from api.records import RECORD_EXAMPLE, FactOut, RecordOut, SourceOut
from api.shared_payloads import DeletionAcceptedOut, accepted
from memory.content import unseal_parts
from memory.deletion.services import memory_delete
from memory.errors import EngramError, InvalidInput
from memory.models import Candidate, RecordStatus, SourceType
from memory.records.presenters import record_payload
from memory.records.selectors import memory_get, memory_history, memory_list
from memory.records.services import (
    MAX_BATCH,
    ItemResult,
    RecordInput,
    WriteResult,
    candidate_submit,
    memory_correct,
    memory_write,
    memory_write_batch,
    outcome_record,
)


class PolicyOut(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["activate", "supersede", "keep_inactive", "conflict"])
    reason = serializers.CharField()
    conflict_with = serializers.ListField(child=serializers.CharField(), required=False,
                                          help_text="With `conflict`: the records that stand beside this one.")


class RecordWriteOut(RecordOut):
    policy = PolicyOut(required=False, help_text="How precedence placed the new record (absent on a replay).")


class RecordPageOut(serializers.Serializer):
    results = RecordOut(many=True)
    next_offset = serializers.IntegerField(allow_null=True, help_text="Pass as `offset` for the next page.")


class CandidateOut(serializers.Serializer):
    candidate_id = serializers.CharField()
    status = serializers.ChoiceField(choices=Candidate.Status.choices)
    subject_id = serializers.CharField()
    namespace = serializers.ListField(child=serializers.CharField())
    kind = serializers.CharField()
    fact = FactOut()
    text = serializers.CharField()
    source = SourceOut()  # type: ignore[assignment]
    confidence = serializers.ChoiceField(choices=["candidate"])
    created_at = serializers.DateTimeField()


ACTIVATED = {"outcome": "activate", "reason": "no active record for this field"}
STATEMENT_EXAMPLE = {
    "namespace": ["user", "travel_preferences"], "kind": "preference",
    "fact": {"field": "seat_preference", "value": "aisle"}, "text": "Prefers aisle seats",
    "source": {"type": "explicit_user_statement", "event_id": "evt_seat_1", "text": "I always take the aisle seat."},
}



def _validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    check_body_scope(request.data, scope_of(request))
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


REPLAY = "The record stored the first time: the same `source.event_id` came with the same body."
# The gate's refusals of a record write (memory/records/gate.py), beside the agent's and the body's.
RECORD_WRITE = (*BODY, *AGENT, "scope_mismatch", "invalid_source_type", "namespace_forbidden", "idempotency_conflict",
                "tombstoned", "class_not_allowed", "secret_detected")


class MemoryListCreateApi(APIView):
    class FilterIn(PageIn):
        namespace = NamespacePathField(required=False, help_text="Records in this namespace or below it.")
        kind = NameField(required=False)
        status = serializers.ChoiceField(choices=RecordStatus.choices, required=False)

    @extend_schema(
        operation_id="memories_list", tags=[Tags.MEMORIES], summary="List the subject's memories",
        description="Newest first, within the principal's grant.", parameters=[FilterIn],
        responses={200: RecordPageOut, **errors(*AGENT, "invalid")})
    def get(self, request: Request) -> Response:
        filters = self.FilterIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        records = memory_list(scope=scope_of(request), namespace=f.get("namespace"), kind=f.get("kind"),
                              status=f.get("status"))
        return Response(page_body(list(records[window(f)]), f, record_payload))

    @extend_schema(
        operation_id="memories_create", tags=[Tags.MEMORIES], summary="Remember an explicit statement",
        description="What the user said, stored as a confirmed record through the write gate (secret scan, memory "
                    "class policy, idempotency on `source.event_id`, precedence). 201 with the new record; 200 "
                    "with the same record when the event id was seen before with the same body.",
        request=RecordIn, responses={**written(RecordWriteOut, new="Stored.", again=REPLAY), **errors(*RECORD_WRITE)},
        examples=[OpenApiExample("An explicit statement", value=STATEMENT_EXAMPLE, request_only=True),
                  OpenApiExample("The stored record", response_only=True, status_codes=[201], value={
                      **RECORD_EXAMPLE, "policy": ACTIVATED})])
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
    @extend_schema(operation_id="memory_get", tags=[Tags.MEMORIES], summary="Read one memory",
                   responses={200: RecordOut, **errors(*AGENT, "not_found")},
                   examples=[OpenApiExample("A record", value=RECORD_EXAMPLE, response_only=True)])
    def get(self, request: Request, memory_id: str) -> Response:
        return Response(record_payload(memory_get(scope=scope_of(request), memory_id=memory_id)))

    @extend_schema(
        operation_id="memory_delete", tags=[Tags.MEMORIES, Tags.DELETION], summary="Forget a memory",
        description="Starts (or returns) the deletion job of the record and the versions it superseded; the job "
                    "reaches every surface and is verified by reading. Follow `status_url`. Deleting twice "
                    "returns the same job.",
        responses={202: DeletionAcceptedOut, **errors(*AGENT, "not_found")})
    def delete(self, request: Request, memory_id: str) -> Response:
        # 202 {"deletion_id", "status", "status_url"}; the deletion area runs the job (api/views/deletion.py).
        return accepted(memory_delete(scope=scope_of(request), memory_id=memory_id))


class MemoryHistoryOut(serializers.Serializer):
    memory_id = serializers.CharField()
    history = RecordOut(many=True, help_text="The supersession chain through the record, oldest first.")


class MemoryHistoryApi(APIView):
    @extend_schema(operation_id="memory_history", tags=[Tags.MEMORIES], summary="A memory's versions",
                   responses={200: MemoryHistoryOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, memory_id: str) -> Response:
        chain = memory_history(scope=scope_of(request), memory_id=memory_id)
        return Response({"memory_id": memory_id, "history": [record_payload(r) for r in chain]})


class OutcomeCreateApi(APIView):
    @extend_schema(
        operation_id="outcomes_create", tags=[Tags.MEMORIES], summary="Record a verified outcome",
        description="A deterministic application outcome, stored verbatim as a confirmed record: the verified "
                    "state as `fact`, or a `reference {system, id}` with the `field` it stands for. 201 new, 200 "
                    "replay of the same `source.event_id`.",
        request=OutcomeIn, responses={**written(RecordWriteOut, new="Stored.", again=REPLAY), **errors(*RECORD_WRITE)},
        examples=[OpenApiExample("By reference", request_only=True, value={
            "namespace": ["user", "travel_preferences"], "kind": "booking", "field": "next_flight",
            "reference": {"system": "booking", "id": "BK-77"}, "text": "Booked on TP123 to Porto",
            "source": {"type": "system_of_record", "event_id": "evt_booking_77"}})])
    def post(self, request: Request) -> Response:
        data = _validated(OutcomeIn, request)
        item = to_record_input(data, default_source=SourceType.VERIFIED_OUTCOME)
        return _write_response(outcome_record(scope=scope_of(request), item=item))


class CandidateCreateApi(APIView):
    @extend_schema(
        operation_id="candidates_create", tags=[Tags.MEMORIES], summary="Propose an inferred memory",
        description="A model-inferred candidate is never a fact: it is stored pending (202) and consolidated by "
                    "the worker, then kept, merged, discarded or queued for a reviewer. 200 on a replay of the "
                    "same `source.event_id`. Needs the `propose` or `write` scope.",
        request=CandidateIn,
        responses={**written(CandidateOut, status=202, new="Stored pending; consolidation decides.",
                             again="The candidate stored the first time."), **errors(*RECORD_WRITE)})
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


class CorrectionOut(RecordOut):
    corrects = serializers.CharField(help_text="The record this correction superseded.")


class CorrectionFactIn(StrictSerializer):
    field = serializers.CharField(max_length=128, required=False, help_text="Ignored: the record keeps its field.")
    value = serializers.JSONField(validators=[check_json_value], help_text="The corrected value, any JSON.")


class CorrectionSourceIn(StrictSerializer):
    type = serializers.ChoiceField(choices=["explicit_user_statement"], required=False,
                                   help_text="A correction is always the user's explicit statement.")
    event_id = serializers.CharField(max_length=128, required=False,
                                     help_text="Idempotency key: a retry with the same id returns the same correction.")
    text = text_field(required=False, help_text="The words the correction came from.")


class CorrectionIn(StrictSerializer):
    """The corrected value (`fact.value`) and/or sentence (`text`)."""

    subject_id = serializers.CharField(max_length=128, required=False)
    fact = CorrectionFactIn(required=False)
    text = text_field(required=False)
    source = CorrectionSourceIn(required=False)  # type: ignore[assignment]


class MemoryCorrectApi(APIView):
    FactIn = CorrectionFactIn
    SourceIn = CorrectionSourceIn

    class InputSerializer(CorrectionIn):
        # `fact` is checked on its own after the body (its errors name its fields); `source` is only read.
        fact = serializers.DictField(required=False)  # type: ignore[assignment]
        source = serializers.DictField(required=False)  # type: ignore[assignment]

    @extend_schema(
        operation_id="memory_correct", tags=[Tags.MEMORIES], summary="Correct a memory",
        description="Writes a new explicit statement that supersedes the record, through the write gate (the "
                    "record's class must take confirmed writes from agents), and marks summaries that cite it "
                    "stale. Needs the `read` scope as well as `write`: the new record carries over the old "
                    "value or sentence the correction leaves out.",
        request=CorrectionIn,
        responses={201: CorrectionOut, **errors(*BODY, *AGENT, "scope_mismatch", "namespace_forbidden", "not_found",
                                                "not_active", "correction_outranked", "class_not_allowed",
                                                "secret_detected")},
        examples=[OpenApiExample("A new value", request_only=True, value={
            "fact": {"value": "window"}, "text": "Prefers window seats now",
            "source": {"text": "Actually, put me by the window from now on."}})])
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


class BatchItemResultOut(serializers.Serializer):
    index = serializers.IntegerField(help_text="The item's position in `items`.")
    status = serializers.ChoiceField(choices=["created", "existing", "error"])
    http_status = serializers.IntegerField(help_text="What the single write would have answered.")
    memory_id = serializers.CharField(required=False)
    record = RecordOut(required=False)
    policy = PolicyOut(required=False)
    code = serializers.CharField(required=False, help_text="With `error`: the single write's error code.")
    detail = serializers.CharField(required=False)


class BatchOut(serializers.Serializer):
    results = BatchItemResultOut(many=True, help_text="One per item, in the order of `items`.")
    created = serializers.IntegerField()
    existing = serializers.IntegerField()
    error = serializers.IntegerField()


class MemoryBatchIn(StrictSerializer):
    """Explicit statements and outcomes to write in one call."""

    items = MemoryBatchItemIn(many=True, allow_empty=False,
                              help_text=f"1 to {MAX_BATCH} items, each checked like its single write.")
    # "worker" (default): embeddings are filled behind by the worker, the call returns at once.
    # "now": computed in this call in one batched model call, stored with the rows.
    embed = serializers.ChoiceField(choices=["worker", "now"], default="worker",
                                    help_text="`worker`: embeddings are filled in behind (the records are "
                                              "searchable by text at once); `now`: computed in this call.")


class MemoryBatchApi(APIView):
    """POST /memories/batch: up to 500 explicit statements or outcomes, one result per item."""

    per_item_fields = ("items",)  # the body parser leaves these to BatchItemParser: one error per bad item

    class InputSerializer(MemoryBatchIn):
        # Each item is checked after the body (BatchItemParser), so one bad item fails alone.
        items = serializers.ListField(child=serializers.DictField(), allow_empty=False)  # type: ignore[assignment]

    @extend_schema(
        operation_id="memories_batch", tags=[Tags.MEMORIES], summary="Write many memories",
        description=f"Up to {MAX_BATCH} explicit statements or outcomes in one transaction, each through the same "
                    "gate as its single write; an item that fails is reported in its result and not written, the "
                    "others are. 200 with one result per item.",
        request=MemoryBatchIn,
        responses={200: BatchOut, **errors(*BODY, *AGENT, "batch_too_large", "batch_interrupted")},
        examples=[
            OpenApiExample("Two items", request_only=True, value={"items": [
                STATEMENT_EXAMPLE,
                {"namespace": ["user", "travel_preferences"], "kind": "preference",
                 "fact": {"field": "meal", "value": "vegetarian"}, "source": {"event_id": "evt_meal_1"}}]}),
            OpenApiExample("One written, one refused", response_only=True, value={"results": [
                {"index": 0, "status": "created", "http_status": 201, "memory_id": RECORD_EXAMPLE["memory_id"],
                 "record": RECORD_EXAMPLE, "policy": ACTIVATED},
                {"index": 1, "status": "error", "http_status": 422, "code": "secret_detected",
                 "detail": "The text holds a secret (AWS Access Key in text)."}],
                "created": 1, "existing": 0, "error": 1})])
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




def _error(index: int, exc: EngramError) -> dict[str, Any]:
    return {"index": index, "status": "error", "http_status": exc.status, "code": exc.code, "detail": exc.detail}


def _result(index: int, result: ItemResult) -> dict[str, Any]:
    written = result.written
    if result.error is not None or written is None:
        return _error(index, result.error or InvalidInput("The item was not written."))
    return {"index": index, "status": result.status, "http_status": 201 if written.created else 200,
            "memory_id": written.record.pk, "record": record_payload(written.record), **_policy(written)}
