"""Deletion, erasure and export: DELETE /subject, GET /deletions/{id}, GET /export.
(DELETE /memories/{id} lives on MemoryDetailApi.)"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import AgentKeyAuthentication, grant_of, scope_of
from memory.deletion.export import export_json
from memory.deletion.models import DeletionJob
from memory.deletion.presenters import job_payload
from memory.deletion.selectors import deletion_get
from memory.deletion.services import subject_erase
from memory.identity.services import TokenInvalid, agent_key_is_active, principal_token_verify
from memory.models import AgentKey
from memory.scope import Scope


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
                     permissions=frozenset(key.permissions), namespaces=grant_of(key, claims),
                     actor=f"agent_key:{key.pk}", agent_key_id=key.pk)


class DeletionDetailApi(APIView):
    authentication_classes = [ErasedSubjectTolerantAuthentication]

    def get(self, request: Request, deletion_id: str) -> Response:
        job = deletion_get(scope=scope_of(request), deletion_id=deletion_id)
        body: dict[str, Any] = dict(job_payload(job))
        body["status_url"] = request.path
        return Response(body)


class SubjectEraseApi(APIView):
    def delete(self, request: Request) -> Response:
        return accepted(subject_erase(scope=scope_of(request)))


class ExportApi(APIView):
    def get(self, request: Request) -> HttpResponse:
        response = HttpResponse(export_json(scope=scope_of(request)), content_type="application/json")
        response["Content-Disposition"] = 'attachment; filename="engram-export.json"'
        return response
