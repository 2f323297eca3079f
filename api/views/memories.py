"""Record writes and reads: /memories, /memories/batch, /memories/{id}/correct, /outcomes, /candidates."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.exceptions import _sentence, record_refusals, strings_of, without_echo
from api.fields import (
    NameField,
    NamespaceField,
    NamespacePathField,
    StrictSerializer,
    check_body_scope,
    check_json_value,
    item_problem,
    text_field,
)
from api.openapi import AGENT, BODY, Tags, errors, written
from api.paging import PageIn, page_body, window
from api.records import RECORD_EXAMPLE, FactOut, RecordOut, SourceOut
from api.views.deletion import DeletionAcceptedOut
from memory.content import unseal_parts
from memory.errors import EngramError, InvalidInput
from memory.ids import new_event_id
from memory.models import Candidate, MemoryType, RecordStatus, SourceType
from memory.namespaces import MAX_DEPTH, NAME
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
    field = NameField(help_text="The fact's field: one record per (namespace, field) is active at a time.")
    value = serializers.JSONField(validators=[check_json_value], help_text="Any JSON value, stored verbatim.")


class ReferenceIn(StrictSerializer):
    system = serializers.CharField(max_length=100, help_text="The system of record, e.g. `booking`.")
    id = serializers.CharField(max_length=200, help_text="The object's id there, e.g. `BK-77`.")


class SourceIn(StrictSerializer):
    type = serializers.CharField(max_length=32, required=False,
                                 help_text="The write path's source type (its default when left out): "
                                           "`explicit_user_statement` for /memories; `verified_outcome`, "
                                           "`system_of_record` or `org_record` for /outcomes; `model_inferred` "
                                           "for /candidates.")
    event_id = serializers.CharField(max_length=128, required=False,
                                     help_text="The source event's id and the write's idempotency key: the same id "
                                               "with the same body returns the first answer (200), with another "
                                               "body 409 `idempotency_conflict`. Generated when left out.")
    text = text_field(required=False, help_text="The words or observation the write came from (evidence).")
    occurred_at = serializers.DateTimeField(required=False)


class RecordIn(StrictSerializer):
    """An explicit statement: what the user said, stored as a confirmed record."""

    subject_id = serializers.CharField(max_length=128, required=False,
                                       help_text="Optional; must equal the principal token's subject (400 "
                                                 "`scope_mismatch` otherwise). It never widens scope.")
    namespace = NamespaceField()
    kind = NameField(help_text="What sort of memory, e.g. `preference`.")
    type = serializers.ChoiceField(choices=MemoryType.choices, default=MemoryType.SEMANTIC)
    fact = FactIn()
    text = text_field(required=False, help_text="The sentence retrieval serves; `field: value` when left out.")
    source = SourceIn(required=False)  # type: ignore[assignment]
    valid_from = serializers.DateTimeField(required=False)
    valid_until = serializers.DateTimeField(required=False, help_text="After this the record reads as expired.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("valid_from") and attrs.get("valid_until") and attrs["valid_until"] <= attrs["valid_from"]:
            raise serializers.ValidationError({"valid_until": "valid_until must be after valid_from."})
        return attrs


class OutcomeIn(RecordIn):
    """A deterministic outcome: the verified state (`fact`) or a `reference` to it, verbatim."""

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
    """A model-inferred candidate: stored pending, never a fact until consolidation (and, where policy says,
    a reviewer) confirms it."""

    evidence = serializers.ListField(child=serializers.DictField(), required=False, max_length=20,
                                     help_text="Quotes the inference rests on, e.g. `{\"event_id\", \"text\"}`.")
    confidence = serializers.FloatField(required=False, min_value=0, max_value=1,
                                        help_text="The model's own confidence; informs review, never decides.")


class MemoryBatchItemIn(OutcomeIn):
    """One item of a batch: an explicit statement (as POST /memories), or an outcome (as POST /outcomes)
    when it has a `reference` or an outcome `source.type`. Each item is checked on its own."""


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
        from api.views.deletion import accepted
        from memory.deletion.services import memory_delete

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
        request=MemoryBatchIn, responses={200: BatchOut, **errors(*BODY, *AGENT, "batch_too_large")},
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


class BatchItemParser:
    """Validates items with the single-write serializers (an outcome when it says so, else a statement).

    One serializer instance per kind is reused for every item: DRF deep-copies the declared fields
    each time a serializer is instantiated, which cost more than the validation itself at 500 items.
    A plain statement (the shape of nearly every imported item) is checked by ``plain_statement``
    instead, to the same rules at a tenth of the cost; anything else, and every item it is not sure
    of, goes through the serializer, which words the error exactly as the single write does."""

    def __init__(self, scope: Any) -> None:
        self.scope = scope
        self.statement = RecordIn()
        self.outcome = OutcomeIn()

    def parse(self, item: dict[str, Any]) -> RecordInput | EngramError:
        problem = item_problem(item)
        if problem is not None:
            return problem
        data = plain_statement(item)
        if data is not None:
            return to_record_input(data, default_source=SourceType.EXPLICIT_USER_STATEMENT)
        return self.by_serializer(item)

    def by_serializer(self, item: dict[str, Any]) -> RecordInput | EngramError:
        """The serializers' answer for an item without a JSON problem."""
        given = item.get("source")
        source: dict[str, Any] = given if isinstance(given, dict) else {}
        is_outcome = "reference" in item or source.get("type") in OUTCOME_SOURCE_TYPES
        try:
            check_body_scope(item, self.scope)
            data = (self.outcome if is_outcome else self.statement).run_validation(item)
        except EngramError as exc:
            return exc
        except ValidationError as exc:
            return InvalidInput(_sentence(without_echo(exc.detail, strings_of(item))))
        default = SourceType.VERIFIED_OUTCOME if is_outcome else SourceType.EXPLICIT_USER_STATEMENT
        return to_record_input(data, default_source=default)


_PLAIN_KEYS = frozenset({"namespace", "kind", "type", "fact", "text", "source"})
_MEMORY_TYPES = frozenset(MemoryType.values)


def _max_length(serializer: type[serializers.Serializer], name: str) -> int:
    field = serializer().fields[name]
    assert isinstance(field, serializers.CharField) and field.max_length is not None
    return int(field.max_length)


# The lengths the serializers allow, read from them so that the two paths cannot drift apart.
_TEXT_LIMIT = _max_length(RecordIn, "text")
_PLAIN_SOURCE_LIMITS = {name: _max_length(SourceIn, name) for name in ("type", "event_id", "text")}


def _name(value: Any) -> bool:
    return type(value) is str and NAME.match(value) is not None


def _plain_text(value: Any, max_length: int) -> str | None:
    """A CharField's value (trimmed, not blank, not too long) when it is a string, else None."""
    if type(value) is not str:
        return None
    value = value.strip()
    return value if value and len(value) <= max_length else None


def plain_statement(item: Any) -> dict[str, Any] | None:
    """What ``RecordIn`` validates a plain statement to, or None when the item is anything else.

    Plain: only namespace, kind, type, fact {field, value}, text and source {type, event_id, text},
    each a string of the right form (a non-outcome source type), a JSON value within its size. None
    hands the item to the serializer: it may be valid (dates, a subject_id, another shape) or not,
    and the serializer says which, and why. tests/api/test_batch_parser.py holds the two to the same
    answers."""
    if type(item) is not dict or not item.keys() <= _PLAIN_KEYS:
        return None
    namespace, fact = item.get("namespace"), item.get("fact")
    if type(namespace) is not list or not 0 < len(namespace) <= MAX_DEPTH or not all(map(_name, namespace)):
        return None
    memory_type = item.get("type", MemoryType.SEMANTIC.value)
    if not _name(item.get("kind")) or type(memory_type) is not str or memory_type not in _MEMORY_TYPES:
        return None
    if type(fact) is not dict or fact.keys() != {"field", "value"} or not _name(fact["field"]):
        return None
    value = fact["value"]
    if value is None:
        return None
    try:
        check_json_value(value)
    except serializers.ValidationError:
        return None
    data: dict[str, Any] = {"namespace": "/".join(namespace), "kind": item["kind"],
                            "type": memory_type, "fact": {"field": fact["field"], "value": value}}
    if "text" in item:
        if (text := _plain_text(item["text"], _TEXT_LIMIT)) is None:
            return None
        data["text"] = text
    if "source" in item:
        given = item["source"]
        if type(given) is not dict or not given.keys() <= _PLAIN_SOURCE_LIMITS.keys():
            return None
        source: dict[str, Any] = {}
        for key, limit in _PLAIN_SOURCE_LIMITS.items():
            if key in given:
                if (checked := _plain_text(given[key], limit)) is None:
                    return None
                source[key] = checked
        if source.get("type") in OUTCOME_SOURCE_TYPES:
            return None
        data["source"] = source
    return data


def _error(index: int, exc: EngramError) -> dict[str, Any]:
    return {"index": index, "status": "error", "http_status": exc.status, "code": exc.code, "detail": exc.detail}


def _result(index: int, result: ItemResult) -> dict[str, Any]:
    written = result.written
    if result.error is not None or written is None:
        return _error(index, result.error or InvalidInput("The item was not written."))
    return {"index": index, "status": result.status, "http_status": 201 if written.created else 200,
            "memory_id": written.record.pk, "record": record_payload(written.record), **_policy(written)}
