"""Deletion, erasure, correction and export: DELETE /subject, GET /deletions/{id},
POST /memories/{id}/correct, GET /export. (DELETE /memories/{id} lives on MemoryDetailApi.)"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import AgentKeyAuthentication, principal_of, scope_of
from api.fields import StrictSerializer, check_body_scope, check_json_value, text_field
from api.serializers import record_payload
from memory.deletion.export import export_json
from memory.deletion.models import DeletionJob
from memory.deletion.selectors import deletion_get, job_payload
from memory.deletion.services import memory_correct, subject_erase
from memory.models import AgentKey
from memory.scope import Scope
from memory.services.identity import TokenInvalid, agent_key_is_active, principal_token_verify


def accepted(job: DeletionJob) -> Response:
    """The 202 body of DELETE /memories/{id} and DELETE /subject."""
    url = reverse("api:deletion-detail", kwargs={"deletion_id": job.pk})
    return Response({"deletion_id": job.pk, "status": job.status, "status_url": url},
                    status=status.HTTP_202_ACCEPTED)


class ErasedSubjectTolerantAuthentication(AgentKeyAuthentication):
    """For the job status only: a valid token whose subject was erased still names the subject (by
    external id in the signed claims), so the caller can watch its erasure complete."""

    def _scope(self, key: AgentKey, token: str) -> Scope:
        try:
            return super()._scope(key, token)
        except exceptions.AuthenticationFailed as exc:
            if exc.get_codes() != "invalid_principal":
                raise
        try:
            claims = principal_token_verify(token)
        except TokenInvalid as err:  # pragma: no cover - the parent already verified it
            raise exceptions.AuthenticationFailed(err.detail, code=err.code) from err
        if claims.key_id is not None and claims.key_id != key.pk and not agent_key_is_active(claims.key_id):
            raise exceptions.AuthenticationFailed("The key that minted this principal token was revoked.",
                                                  code="principal_revoked")
        return Scope(tenant_id=key.tenant_id, subject_id=0, subject_external_id=claims.subject_external_id,
                     permissions=frozenset(key.permissions), namespaces=None, actor=f"agent_key:{key.pk}",
                     agent_key_id=key.pk)


class DeletionDetailApi(APIView):
    authentication_classes = [ErasedSubjectTolerantAuthentication]

    def get(self, request: Request, deletion_id: str) -> Response:
        scope = scope_of(request)
        job = deletion_get(tenant_id=scope.tenant_id, subject_external_id=scope.subject_external_id,
                           deletion_id=deletion_id)
        body: dict[str, Any] = dict(job_payload(job))
        body["status_url"] = request.path
        return Response(body)


class SubjectEraseApi(APIView):
    def delete(self, request: Request) -> Response:
        return accepted(subject_erase(scope=scope_of(request)))


class MemoryCorrectApi(APIView):
    class FactIn(StrictSerializer):
        field = serializers.CharField(max_length=128, required=False)
        value = serializers.JSONField(validators=[check_json_value])

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
        source = data.get("source") or {}
        result = memory_correct(scope=scope, memory_id=memory_id, value=fact["value"] if fact else None,
                                text=data.get("text", ""), event_text=str(source.get("text", ""))[:4000])
        body: dict[str, Any] = dict(record_payload(result.record))
        body["corrects"] = result.previous.pk
        return Response(body, status=status.HTTP_201_CREATED)


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ExportApi(APIView):
    def get(self, request: Request) -> HttpResponse:
        principal_of(request)
        response = HttpResponse(export_json(scope=scope_of(request)), content_type="application/json")
        response["Content-Disposition"] = 'attachment; filename="engram-export.json"'
        return response
