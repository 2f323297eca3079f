"""Knowledge documents: /documents, /documents/batch, /documents/{id}."""

from __future__ import annotations

from typing import Any, TypedDict

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import scope_of
from api.exceptions import _sentence, strings_of, without_echo
from api.fields import NameField, StrictSerializer, check_json_value, item_problem
from api.openapi import AGENT, BODY, SecretFindingOut, Tags, errors, written
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


class DocumentOut(serializers.Serializer):
    document_id = serializers.IntegerField()
    access_domain = serializers.CharField()
    external_id = serializers.CharField()
    title = serializers.CharField()
    uri = serializers.CharField()
    mime_type = serializers.CharField()
    content_hash = serializers.CharField()
    version = serializers.IntegerField(help_text="1, then one more for each ingest with new content.")
    metadata = serializers.DictField()
    char_count = serializers.IntegerField()
    chunk_count = serializers.IntegerField(allow_null=True)
    ingested_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()


class DocumentPageOut(serializers.Serializer):
    results = DocumentOut(many=True)
    next_offset = serializers.IntegerField(allow_null=True, help_text="Pass as `offset` for the next page.")


class IngestOut(DocumentOut):
    result = serializers.ChoiceField(choices=["created", "updated", "unchanged"])


class ChunkOut(serializers.Serializer):
    ordinal = serializers.IntegerField()
    char_start = serializers.IntegerField()
    char_end = serializers.IntegerField()
    tokens = serializers.IntegerField()
    text = serializers.CharField()


class DocumentDetailOut(DocumentOut):
    chunks = ChunkOut(many=True)


class DocumentStepOut(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField()
    rows = serializers.IntegerField()
    attempts = serializers.IntegerField()


class DocumentDeletionOut(serializers.Serializer):
    deletion_id = serializers.CharField()
    status = serializers.CharField(help_text="`completed` when every surface was purged and read again.")
    status_url = serializers.CharField()
    document_ids = serializers.ListField(child=serializers.IntegerField())
    steps = DocumentStepOut(many=True)


class DocumentBatchItemOut(serializers.Serializer):
    index = serializers.IntegerField()
    external_id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["created", "updated", "unchanged", "error"])
    document_id = serializers.IntegerField(required=False)
    version = serializers.IntegerField(required=False)
    code = serializers.CharField(required=False, help_text="With `error`: what POST /documents would have answered.")
    detail = serializers.CharField(required=False)
    findings = SecretFindingOut(many=True, required=False)


class DocumentBatchOut(serializers.Serializer):
    results = DocumentBatchItemOut(many=True)
    stored = serializers.IntegerField()
    failed = serializers.IntegerField()


class DocumentIn(StrictSerializer):
    """A document for an access domain the principal reads. The same content again is a no-op; new content
    becomes the next version."""

    access_domain = NameField()
    external_id = serializers.CharField(max_length=200, help_text="The document's id in its source; a new post "
                                                                  "with the same id is a new version.")
    title = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    text = serializers.CharField(trim_whitespace=False)
    uri = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    mime_type = serializers.ChoiceField(choices=MIME_TYPES, default="text/plain",
                                        help_text="HTML and Markdown are converted to text.")
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


DOCUMENT_EXAMPLE = {"access_domain": "handbook", "external_id": "travel-policy", "title": "Travel policy",
                    "text": "# Travel policy\n\nEconomy class for flights under six hours.",
                    "mime_type": "text/markdown"}


class DocumentListCreateApi(APIView):
    class FilterIn(PageIn):
        access_domain = NameField(required=False)

    @extend_schema(operation_id="documents_list", tags=[Tags.KNOWLEDGE], summary="List documents",
                   description="Documents of the access domains the principal reads, newest first.",
                   parameters=[FilterIn], responses={200: DocumentPageOut, **errors(*AGENT, "invalid")})
    def get(self, request: Request) -> Response:
        filters = self.FilterIn(data=request.query_params)
        filters.is_valid(raise_exception=True)
        f = filters.validated_data
        documents = document_list(scope=scope_of(request), access_domain=f.get("access_domain"))
        return Response(page_body(list(documents[window(f)]), f, document_payload))

    @extend_schema(
        operation_id="document_ingest", tags=[Tags.KNOWLEDGE], summary="Ingest a document",
        description="Chunked and indexed at once. 201 `created`; 200 `updated` (new content: the next version, its "
                    "chunks replaced atomically) or `unchanged`. A document holding a secret is refused whole, "
                    "with where each finding is and never its content.",
        request=DocumentIn,
        responses={**written(IngestOut, new="`created`.", again="`updated` (the next version) or `unchanged`."),
                   **errors(*BODY, *AGENT, "not_found", "document_too_large", "empty_document", "secret_detected")},
        examples=[OpenApiExample("A Markdown page", request_only=True, value=DOCUMENT_EXAMPLE)])
    def post(self, request: Request) -> Response:
        serializer = DocumentIn(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = document_ingest(scope=scope_of(request), item=_input(serializer.validated_data))
        return Response(_ingest_body(result),
                        status=status.HTTP_201_CREATED if result.status == "created" else status.HTTP_200_OK)


class DocumentBatchIn(StrictSerializer):
    documents: serializers.ListSerializer = serializers.ListSerializer(child=DocumentIn(), min_length=1,
                                                                       max_length=MAX_BATCH)


class DocumentBatchApi(APIView):
    per_item_fields = ("documents",)  # the body parser leaves these to the loop below: one error per bad item

    class BatchIn(DocumentBatchIn):
        # Each document is checked after the body, so one bad document fails alone.
        documents = serializers.ListField(child=serializers.JSONField(), min_length=1,  # type: ignore[assignment]
                                          max_length=MAX_BATCH)

    @extend_schema(
        operation_id="documents_batch", tags=[Tags.KNOWLEDGE], summary="Ingest many documents",
        description=f"Up to {MAX_BATCH} documents, all embedded in one model call; each succeeds or fails alone "
                    "(one result per document, in order).",
        request=DocumentBatchIn, responses={200: DocumentBatchOut, **errors(*BODY, *AGENT, "batch_interrupted")})
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
                         else InvalidInput(_sentence(without_echo(item.errors, strings_of(raw)))))
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
    @extend_schema(operation_id="document_get", tags=[Tags.KNOWLEDGE], summary="Read a document and its chunks",
                   responses={200: DocumentDetailOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, document_id: int) -> Response:
        document = document_get(scope=scope_of(request), document_id=document_id)
        chunks = [{"ordinal": c.ordinal, "char_start": c.char_start, "char_end": c.char_end,
                   "tokens": c.token_count, "text": c.text} for c in document_chunks(document=document)]
        return Response({**document_payload(document), "chunks": chunks})

    @extend_schema(
        operation_id="document_delete", tags=[Tags.KNOWLEDGE, Tags.DELETION], summary="Delete a document",
        description="Purges the document from every surface and reads them again before answering; deleting "
                    "again returns the same job.",
        responses={202: DocumentDeletionOut, **errors(*AGENT, "not_found", "deletion_incomplete")})
    def delete(self, request: Request, document_id: int) -> Response:
        job = document_delete(scope=scope_of(request), document_id=document_id)
        return Response(deletion_payload(job), status=status.HTTP_202_ACCEPTED)
