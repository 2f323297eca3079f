"""Retrieval: /retrieve, /retrievals/{id}, /facts."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, PolymorphicProxySerializer, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.fields import NameField, NamespaceField, NamespacePathField, StrictSerializer, check_body_scope
from api.openapi import AGENT, BODY, ErrorOut, Tags, errors
from api.prefetch import MAX_QUERY_CHARS, prefetch_query_vector
from api.records import RECORD_EXAMPLE, RecordOut
from api.shared_payloads import SeqRangeOut, SummarizerOut
from memory.models import MemoryType
from memory.records.presenters import record_payload
from memory.retrieval.pipeline import DEFAULT_BUDGET_TOKENS, DEFAULT_LIMIT, MAX_LIMIT, RetrieveRequest, memory_retrieve
from memory.retrieval.selectors import FactConflict, fact_get, retrieval_log_get


class PacketOut(serializers.Serializer):
    """What every packet has: its source, score, token count and the flags of instruction-shaped text."""

    score = serializers.FloatField(help_text="Fused relevance, authority, confidence and recency.")
    tokens = serializers.IntegerField(help_text="What this packet costs of the budget.")
    match = serializers.ChoiceField(
        choices=["strong", "weak"],
        help_text="`strong`: the legs agree (the question's words and meaning) or the meaning alone is close. `weak`: "
                  "the best this subject holds for the question, but not clearly about it (served so that an answer "
                  "is never empty when something relevant may exist; a question about something never said gets "
                  "weak matches at most).")
    content_role = serializers.ChoiceField(choices=["data"], help_text="Memory is data for the model, never "
                                                                      "instructions.")
    flags = serializers.ListField(child=serializers.CharField(), help_text="`agent_instructions`, `hidden_text`: the "
                                                                          "text reads like instructions to a model.")
    source_date = serializers.DateField(allow_null=True)


class MemoryPacketOut(PacketOut):
    """A long-term memory record."""

    source = serializers.ChoiceField(choices=["memory"])  # type: ignore[assignment]
    fact = serializers.CharField(help_text="The record's sentence.")
    status = serializers.ChoiceField(choices=["confirmed", "candidate"])
    memory_id = serializers.CharField()
    kind = serializers.CharField()
    namespace = serializers.ListField(child=serializers.CharField())
    conflict = serializers.BooleanField(required=False, help_text="Present when the record is in an open conflict.")


class SummaryPacketOut(PacketOut):
    """A fresh thread summary (`include: ["summaries"]`; needs a `threads` grant)."""

    source = serializers.ChoiceField(choices=["summaries"])  # type: ignore[assignment]
    kind = serializers.ChoiceField(choices=["summary"])
    text = serializers.CharField()
    thread_id = serializers.CharField()
    summary_id = serializers.CharField()
    source_range = SeqRangeOut()
    status = serializers.CharField()
    summarizer = SummarizerOut()
    unresolved = serializers.ListField(child=serializers.JSONField())
    referenced_event_ids = serializers.ListField(child=serializers.CharField())


class ProcedurePacketOut(PacketOut):
    """The current approved version of a procedure (`include: ["procedures"]`)."""

    source = serializers.ChoiceField(choices=["procedures"])  # type: ignore[assignment]
    kind = serializers.ChoiceField(choices=["procedure"])
    text = serializers.CharField(help_text="The procedure's body.")
    name = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["approved"])
    approved_by = serializers.CharField()
    approved_at = serializers.DateTimeField()
    procedure_scope = serializers.CharField()


class KnowledgePacketOut(PacketOut):
    """A chunk of a document in an access domain the principal reads (`include: ["knowledge"]`)."""

    source = serializers.ChoiceField(choices=["knowledge"])  # type: ignore[assignment]
    kind = serializers.ChoiceField(choices=["knowledge"])
    text = serializers.CharField(help_text="The chunk's text.")
    document_id = serializers.IntegerField()
    external_id = serializers.CharField()
    title = serializers.CharField()
    chunk = serializers.IntegerField(help_text="The chunk's ordinal in the document.")
    chunk_id = serializers.IntegerField()
    span = serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2,
                                 help_text="[char_start, char_end] in the document's text.")
    version = serializers.IntegerField()
    access_domain = serializers.CharField()
    uri = serializers.CharField()
    chunk_tokens = serializers.IntegerField()


PACKET = PolymorphicProxySerializer(
    component_name="Packet", resource_type_field_name="source", many=False,
    serializers={"memory": MemoryPacketOut, "summaries": SummaryPacketOut, "procedures": ProcedurePacketOut,
                 "knowledge": KnowledgePacketOut})


class BudgetOut(serializers.Serializer):
    limit = serializers.IntegerField(help_text="The `budget_tokens` asked for.")
    used = serializers.IntegerField(help_text="Tokens the packets cost, counted with the model's tokenizer.")


class RetrieveOut(serializers.Serializer):
    retrieval_id = serializers.CharField(help_text="GET /retrievals/{id} says why each candidate was kept or dropped.")
    packets = serializers.ListField(child=PACKET, help_text="Best first, within `limit` and the budget.")
    budget = BudgetOut()
    dropped = serializers.DictField(child=serializers.IntegerField(),
                                    help_text="Candidates left out, by reason: `expired`, `superseded`, `deleted`, "
                                              "`out_of_scope`, `below_threshold`, `duplicate`, `limit`, `budget`, "
                                              "`semantic_pending`.")
    degraded = serializers.ListField(child=serializers.ChoiceField(choices=["semantic_unavailable"]),
                                     help_text="What this answer had to do without: `semantic_unavailable` when the "
                                               "embedding model failed (the ranking is lexical only).")


class RetrieveApi(APIView):
    @extend_schema_serializer(component_name="Retrieve")
    class InputSerializer(StrictSerializer):
        query = serializers.CharField(max_length=MAX_QUERY_CHARS, trim_whitespace=True)
        subject_id = serializers.CharField(max_length=128, required=False)
        namespaces = serializers.ListField(child=NamespaceField(), required=False, allow_empty=False, max_length=50,
                                           help_text="Narrow to these namespaces (and below); never wider than "
                                                     "the grant.")
        kinds = serializers.ListField(child=NameField(), required=False, allow_empty=False, max_length=50)
        types = serializers.ListField(child=serializers.ChoiceField(choices=MemoryType.choices), required=False,
                                      allow_empty=False)
        filters = serializers.DictField(required=False, help_text="`fields` and `source_types`: a string or a list "
                                                                  "of strings each.")
        budget_tokens = serializers.IntegerField(min_value=1, max_value=100_000, default=DEFAULT_BUDGET_TOKENS)
        limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)
        include = serializers.ListField(child=serializers.CharField(max_length=32), required=False,
                                        allow_empty=False, max_length=10,
                                        help_text="Sources to search: `memory` (the default), `summaries`, "
                                                  "`procedures`, `knowledge`.")

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # The query's embedding starts now and runs beside authentication and the throttle (api/prefetch.py).
        prefetch_query_vector(request)
        super().initial(request, *args, **kwargs)

    @extend_schema(
        operation_id="retrieve", tags=[Tags.RETRIEVAL], summary="Retrieve memory for a task",
        description="Scope first, inside SQL (tenant, subject, grant, class readers, validity), then lexical and "
                    "semantic search, fusion, reranking, `limit` and a token budget. Packets carry their provenance; "
                    "every call writes a log.",
        request=InputSerializer, responses={200: RetrieveOut, **errors(*BODY, *AGENT, "scope_mismatch",
                                                                         "invalid_filter", "invalid_include",
                                                                         "secret_detected")},
        examples=[
            OpenApiExample("A task's question", request_only=True, value={
                "query": "which seat should I book?", "namespaces": [["user", "travel_preferences"]],
                "budget_tokens": 200, "include": ["memory", "procedures"]}),
            OpenApiExample("Packets within the budget", response_only=True, value={
                "retrieval_id": "ret_01JZ8QA1E2S3D4F5G6H7J8K9LM",
                "packets": [{"source": "memory", "fact": "Prefers aisle seats", "status": "confirmed",
                             "source_date": None, "memory_id": RECORD_EXAMPLE["memory_id"], "kind": "preference",
                             "namespace": ["user", "travel_preferences"], "score": 0.8412, "match": "strong",
                             "tokens": 5,
                             "content_role": "data", "flags": []}],
                "budget": {"limit": 200, "used": 5}, "dropped": {"superseded": 1, "below_threshold": 3},
                "degraded": []})])
    def post(self, request: Request) -> Response:
        scope = scope_of(request)
        check_body_scope(request.data, scope)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        result = memory_retrieve(scope=scope, request=RetrieveRequest(
            query=d["query"], namespaces=d.get("namespaces"), kinds=d.get("kinds"), types=d.get("types"),
            filters=d.get("filters") or {}, budget_tokens=d["budget_tokens"], limit=d["limit"],
            include=tuple(dict.fromkeys(d.get("include") or ["memory"])),
        ))
        return Response(result.as_dict())


class LogPrincipalOut(serializers.Serializer):
    subject_id = serializers.CharField()
    actor = serializers.CharField(help_text="Who retrieved, e.g. `agent_key:12`.")


class RetrievalLogOut(serializers.Serializer):
    retrieval_id = serializers.CharField()
    query = serializers.CharField(help_text="Empty when the writer's grant was wider than the reader's.")
    request = serializers.DictField(help_text="The retrieve request as it was run.")
    principal = LogPrincipalOut()
    candidates = serializers.ListField(child=serializers.DictField(),
                                       help_text="Each candidate the reader may see: ranks, scores, `selected` and "
                                                 "the `reason` it was kept or dropped.")
    budget = BudgetOut()
    dropped = serializers.DictField(child=serializers.IntegerField())
    timings_ms = serializers.DictField(child=serializers.FloatField())
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(help_text="Logs follow the retention of the classes they quote.")


class FactConflictOut(ErrorOut):
    records = RecordOut(many=True, help_text="The records precedence cannot choose between.")


class RetrievalDetailApi(APIView):
    @extend_schema(operation_id="retrieval_get", tags=[Tags.RETRIEVAL], summary="Why a retrieval kept what it kept",
                   responses={200: RetrievalLogOut, **errors(*AGENT, "not_found")})
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
        namespace = NamespacePathField()
        field = NameField()

    @extend_schema(
        operation_id="fact_get", tags=[Tags.RETRIEVAL], summary="The fact precedence chooses",
        description="The one active record for (namespace, field) that precedence chooses; 409 `conflict` with the "
                    "competing records when two records of equal authority disagree.",
        parameters=[InputSerializer],
        responses={200: RecordOut, **errors(*AGENT, "invalid", "not_found", "conflict", bodies={409: FactConflictOut})},
        examples=[OpenApiExample("The chosen record", value=RECORD_EXAMPLE, response_only=True)])
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
