"""Retrieval: /retrieve, /retrievals/{id}, /facts."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.fields import NameField, NamespaceField, StrictSerializer, check_body_scope
from memory.models import MemoryType
from memory.policy.secrets import refuse_secrets
from memory.records.presenters import record_payload
from memory.retrieval.pipeline import DEFAULT_BUDGET_TOKENS, DEFAULT_LIMIT, MAX_LIMIT, RetrieveRequest, memory_retrieve
from memory.retrieval.selectors import FactConflict, fact_get, retrieval_log_get


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
