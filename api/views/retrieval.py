"""Retrieval: /retrieve, /retrievals/{id}, /facts, and bulk writes at /memories/batch."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.exceptions import _sentence
from api.fields import NameField, NamespaceField, StrictSerializer, check_body_scope, item_problem
from api.serializers import record_payload
from api.views.memories import OutcomeIn, RecordIn, to_record_input
from memory.errors import EngramError, InvalidInput
from memory.models import MemoryType, SourceType
from memory.retrieval.pipeline import DEFAULT_BUDGET_TOKENS, DEFAULT_LIMIT, MAX_LIMIT, RetrieveRequest, memory_retrieve
from memory.retrieval.selectors import FactConflict, fact_get, retrieval_log_get
from memory.services.batch import MAX_BATCH, ItemResult, memory_write_batch
from memory.services.writes import OUTCOME_SOURCE_TYPES, RecordInput, refuse_secrets


class RetrieveApi(APIView):
    class InputSerializer(StrictSerializer):
        query = serializers.CharField(max_length=2000, trim_whitespace=True)
        subject_id = serializers.CharField(max_length=128, required=False)
        namespaces = serializers.ListField(child=NamespaceField(), required=False, allow_empty=False, max_length=50)
        kinds = serializers.ListField(child=NameField(), required=False, allow_empty=False, max_length=50)
        types = serializers.ListField(child=serializers.ChoiceField(choices=MemoryType.choices), required=False,
                                      allow_empty=False)
        filters = serializers.DictField(required=False)
        budget_tokens = serializers.IntegerField(min_value=1, max_value=100_000, default=DEFAULT_BUDGET_TOKENS)
        limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)
        include = serializers.ListField(child=serializers.CharField(max_length=32), required=False,
                                        allow_empty=False, max_length=10)

    def post(self, request: Request) -> Response:
        scope = scope_of(request)
        check_body_scope(request.data, scope)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        # The query and filters are kept in the retrieval log (and shown in exports): a secret in them is
        # refused like a secret in a write, and stored nowhere.
        refuse_secrets({"query": d["query"], "filters": d.get("filters") or {}})
        result = memory_retrieve(scope=scope, request=RetrieveRequest(
            query=d["query"], namespaces=d.get("namespaces"), kinds=d.get("kinds"), types=d.get("types"),
            filters=d.get("filters") or {}, budget_tokens=d["budget_tokens"], limit=d["limit"],
            include=tuple(dict.fromkeys(d.get("include") or ["memory"])),
        ))
        return Response(result.as_dict())


class RetrievalDetailApi(APIView):
    def get(self, request: Request, retrieval_id: str) -> Response:
        log = retrieval_log_get(scope=scope_of(request), retrieval_id=retrieval_id)
        return Response({
            "retrieval_id": log.pk, "query": log.query, "request": log.request,
            "principal": {"subject_id": scope_of(request).subject_external_id, "actor": log.actor},
            "candidates": log.candidates, "budget": log.budget, "dropped": log.dropped,
            "timings_ms": log.timings_ms, "created_at": log.created_at.isoformat(),
            "expires_at": log.expires_at.isoformat(),
        })


class FactApi(APIView):
    class InputSerializer(serializers.Serializer):
        namespace = NamespaceField()
        field = NameField()

    def get(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        try:
            record = fact_get(scope=scope_of(request), **serializer.validated_data)
        except FactConflict as exc:
            body: dict[str, Any] = {"code": exc.code, "detail": exc.detail,
                                    "records": [record_payload(r) for r in exc.records]}
            return Response(body, status=exc.status)
        return Response(record_payload(record))


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
    if result.error is not None or result.record is None:
        return _error(index, result.error or InvalidInput("The item was not written."))
    body: dict[str, Any] = {"index": index, "status": result.status, "http_status": 201 if result.created else 200,
                            "memory_id": result.record.pk, "record": record_payload(result.record)}
    if result.decision is not None:
        body["policy"] = {"outcome": result.decision.outcome.value, "reason": result.decision.reason}
        if result.conflict_with:
            body["policy"]["conflict_with"] = result.conflict_with
    return body
