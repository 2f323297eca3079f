"""Deletion, erasure and export: DELETE /subject, GET /deletions/{id}, GET /export.
(DELETE /memories/{id} lives on MemoryDetailApi.)"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.drainage import set_override
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import AgentKeyAuthentication, grant_of, scope_of
from api.openapi import AGENT, Tags, errors
from api.records import RecordOut
from api.shared_payloads import DeletionAcceptedOut, accepted
from memory.deletion.export import export_json
from memory.deletion.models import DeletionJob
from memory.deletion.presenters import job_payload
from memory.deletion.selectors import deletion_get
from memory.deletion.services import subject_erase
from memory.identity.services import PrincipalClaims
from memory.models import AgentKey
from memory.scope import Scope


class StepOut(serializers.Serializer):
    name = serializers.CharField(help_text="The surface, e.g. `record_content`, `embedding`, ..., `verification`.")
    status = serializers.CharField(help_text="`pending`, `done` or `failed`.")
    attempts = serializers.IntegerField()
    rows = serializers.IntegerField()
    last_error = serializers.CharField(help_text="Why the last attempt failed (content redacted).")


class DeletionJobOut(serializers.Serializer):
    deletion_id = serializers.CharField()
    kind = serializers.CharField(help_text="What is deleted: `memory`, `subject`, `document`, `retention`, ...")
    status = serializers.ChoiceField(choices=DeletionJob.Status.choices,
                                     help_text="`completed` only once verification read every surface again.")
    reason = serializers.CharField(help_text="Why the job failed, when it did.")
    memory_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    completed_at = serializers.DateTimeField(allow_null=True)
    steps = StepOut(many=True, help_text="One per surface, in order, then verification.")
    status_url = serializers.CharField()


class ProvenanceOut(serializers.Serializer):
    event_id = serializers.CharField()
    source_type = serializers.CharField()
    text = serializers.CharField(help_text="The words the record came from.")
    occurred_at = serializers.DateTimeField(allow_null=True)
    recorded_at = serializers.DateTimeField()


class ExportRecordOut(RecordOut):
    provenance = ProvenanceOut(required=False, help_text="The source event, with its words.")


class ExportOut(serializers.Serializer):
    """Everything held about the subject that the principal may read. Sections of thread state and
    retrieval logs are their tables' rows; a table added later appears as its own section."""

    subject_id = serializers.CharField()
    display_name = serializers.CharField(required=False, allow_blank=True,
                                         help_text="What people's pages call the subject (\"\": unnamed).")
    exported_at = serializers.DateTimeField()
    records = ExportRecordOut(many=True)
    candidates = serializers.ListField(child=serializers.DictField())
    events = serializers.ListField(child=serializers.DictField(), help_text="The source events of what is shown.")
    threads = serializers.ListField(child=serializers.DictField())
    thread_events = serializers.ListField(child=serializers.DictField(), required=False)
    summaries = serializers.ListField(child=serializers.DictField())
    checkpoints = serializers.ListField(child=serializers.DictField())
    tool_calls = serializers.ListField(child=serializers.DictField(), required=False)
    retrieval_logs = serializers.ListField(child=serializers.DictField())

    def get_fields(self) -> dict[str, serializers.Field]:
        # A section named by its table's label, not a Python name.
        return {**super().get_fields(), "memory.conflict": serializers.ListField(
            child=serializers.DictField(), required=False, help_text="Open and resolved conflicts about the subject.")}


class ExportSections(OpenApiSerializerExtension):
    """Any other table that holds rows about a subject is exported as its own section (`<app>.<model>`)."""

    target_class = ExportOut

    def map_serializer(self, auto_schema: AutoSchema, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        schema["additionalProperties"] = {"type": "array", "items": {"type": "object", "additionalProperties": {}}}
        return schema


class ErasedSubjectTolerantAuthentication(AgentKeyAuthentication):
    """For the job status only: a valid token whose subject was erased still names the subject (by
    external id in the signed claims), so the caller can watch its erasure complete."""

    def _scope(self, key: AgentKey, claims: PrincipalClaims) -> Scope:
        try:
            return super()._scope(key, claims)
        except exceptions.AuthenticationFailed as exc:
            if exc.get_codes() != "invalid_principal":
                raise
        return Scope.for_agent(tenant_id=key.tenant_id, subject_id=0, subject_external_id=claims.subject_external_id,
                               agent_key_id=key.pk, permissions=key.permissions, namespaces=grant_of(key, claims))


# It takes the same two credentials as its parent: one pair of security schemes in the schema.
set_override(ErasedSubjectTolerantAuthentication, "suppress_collision_warning", True)


class DeletionDetailApi(APIView):
    authentication_classes = [ErasedSubjectTolerantAuthentication]

    @extend_schema(
        operation_id="deletion_get", tags=[Tags.DELETION], summary="Follow a deletion job",
        description="Each surface's step, then verification. A token whose subject was erased still reads its "
                    "erasure job.",
        responses={200: DeletionJobOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, deletion_id: str) -> Response:
        job = deletion_get(scope=scope_of(request), deletion_id=deletion_id)
        body: dict[str, Any] = dict(job_payload(job))
        body["status_url"] = request.path
        return Response(body)


class SubjectEraseApi(APIView):
    @extend_schema(
        operation_id="subject_erase", tags=[Tags.DELETION], summary="Erase everything about the subject",
        description="Starts (or returns the running) erasure job: every record, event, thread, summary, log and "
                    "the subject itself; only content-free tombstones remain. Needs a principal without namespace "
                    "restrictions.",
        responses={202: DeletionAcceptedOut, **errors(*AGENT, "namespace_forbidden")})
    def delete(self, request: Request) -> Response:
        return accepted(subject_erase(scope=scope_of(request)))


class ExportApi(APIView):
    @extend_schema(
        operation_id="export", tags=[Tags.DELETION], summary="Export the subject's data",
        description="A JSON attachment of everything held about the subject that the principal may read.",
        responses={200: OpenApiResponse(ExportOut, description="`Content-Disposition: attachment`."),
                   **errors(*AGENT)},
        parameters=[OpenApiParameter("Content-Disposition", str, OpenApiParameter.HEADER, response=[200],
                                     description='`attachment; filename="engram-export.json"`')])
    def get(self, request: Request) -> HttpResponse:
        response = HttpResponse(export_json(scope=scope_of(request)), content_type="application/json")
        response["Content-Disposition"] = 'attachment; filename="engram-export.json"'
        return response
