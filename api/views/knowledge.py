"""Knowledge documents: /documents, /documents/batch, /documents/{id}."""

from __future__ import annotations

from typing import Any, TypedDict

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.exceptions import _sentence
from api.fields import NameField, StrictSerializer, check_json_value, item_problem
from api.paging import PageIn, page_body, window
from memory.errors import EngramError, InvalidInput
from memory.knowledge.deletion import deletion_payload, document_delete
from memory.knowledge.models import Document
from memory.knowledge.selectors import document_chunks, document_get, document_list
from memory.knowledge.services import (
    MAX_BATCH,
    DocumentInput,
    IngestResult,
    document_batch_ingest,
    document_ingest,
    max_document_chars,
)

MIME_TYPES = ("text/plain", "text/markdown", "text/html")


class DocumentPayload(TypedDict):
    document_id: int
    access_domain: str
    external_id: str
    title: str
    uri: str
    mime_type: str
    content_hash: str
    version: int
    metadata: dict[str, Any]
    char_count: int
    chunk_count: int | None
    ingested_at: str
    created_at: str


def document_payload(document: Document) -> DocumentPayload:
    return {
        "document_id": document.pk,
        "access_domain": document.access_domain.name,
        "external_id": document.external_id,
        "title": document.title,
        "uri": document.uri,
        "mime_type": document.mime_type,
        "content_hash": document.content_hash,
        "version": document.version,
        "metadata": document.metadata,
        "char_count": document.char_count,
        "chunk_count": getattr(document, "chunk_count", None),
        "ingested_at": document.ingested_at.isoformat(),
        "created_at": document.created_at.isoformat(),
    }


class DocumentIn(StrictSerializer):
    access_domain = NameField()
    external_id = serializers.CharField(max_length=200)
    title = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    text = serializers.CharField(trim_whitespace=False)
    uri = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    mime_type = serializers.ChoiceField(choices=MIME_TYPES, default="text/plain")
    metadata = serializers.DictField(required=False, default=dict, validators=[check_json_value])

    def validate_text(self, value: str) -> str:
        if len(value) > max_document_chars():
            raise serializers.ValidationError(f"A document's text is at most {max_document_chars()} characters.")
        return value


def _input(data: dict[str, Any]) -> DocumentInput:
    return DocumentInput(access_domain=data["access_domain"], external_id=data["external_id"], title=data["title"],
                         text=data["text"], uri=data["uri"], mime_type=data["mime_type"],
                         metadata=dict(data["metadata"]))


def _ingest_body(result: IngestResult) -> dict[str, Any]:
    return {**document_payload(result.document), "result": result.status}


class DocumentListCreateApi(APIView):
    class FilterIn(PageIn):
        access_domain = NameField(required=False)

    def get(self, request: Request) -> Response:
        filters = self.FilterIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        documents = document_list(scope=scope_of(request), access_domain=f.get("access_domain"))
        return Response(page_body(list(documents[window(f)]), f, document_payload))

    def post(self, request: Request) -> Response:
        serializer = DocumentIn(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = document_ingest(scope=scope_of(request), item=_input(serializer.validated_data))
        return Response(_ingest_body(result),
                        status=status.HTTP_201_CREATED if result.status == "created" else status.HTTP_200_OK)


class DocumentBatchApi(APIView):
    per_item_fields = ("documents",)  # the body parser leaves these to the loop below: one error per bad item

    class BatchIn(StrictSerializer):
        documents = serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=MAX_BATCH)

    def post(self, request: Request) -> Response:
        batch = self.BatchIn(data=request.data)
        batch.is_valid(raise_exception=True)
        items: list[DocumentInput | EngramError] = []
        for raw in batch.validated_data["documents"]:
            problem = item_problem(raw)
            if problem is not None:
                items.append(problem)
                continue
            item = DocumentIn(data=raw)
            items.append(_input(item.validated_data) if item.is_valid()
                         else InvalidInput(_sentence(item.errors)))
        results = document_batch_ingest(scope=scope_of(request), items=items)
        body = []
        for r in results:
            entry: dict[str, Any] = {"index": r.index, "external_id": r.external_id}
            if r.result is not None:
                entry.update(status=r.result.status, document_id=r.result.document.pk,
                             version=r.result.document.version)
            elif r.error is not None:
                entry.update(status="error", code=r.error.code, detail=r.error.detail, **r.error.extra)
            body.append(entry)
        stored = sum(1 for r in results if r.result is not None)
        return Response({"results": body, "stored": stored, "failed": len(results) - stored})


class DocumentDetailApi(APIView):
    def get(self, request: Request, document_id: int) -> Response:
        document = document_get(scope=scope_of(request), document_id=document_id)
        chunks = [{"ordinal": c.ordinal, "char_start": c.char_start, "char_end": c.char_end,
                   "tokens": c.token_count, "text": c.text} for c in document_chunks(document=document)]
        return Response({**document_payload(document), "chunks": chunks})

    def delete(self, request: Request, document_id: int) -> Response:
        job = document_delete(scope=scope_of(request), document_id=document_id)
        return Response(deletion_payload(job), status=status.HTTP_202_ACCEPTED)
