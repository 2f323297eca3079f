"""Procedures: read-only to agents. /procedures, /procedures/{name}, /versions/{n}, /proposals.

Agents read the current approved version and may propose a change (propose scope). Every other
write (POST/PUT/PATCH/DELETE on a procedure, its versions or a proposal, or on any path below a
procedure) is refused with 403 ``procedure_read_only`` and an audit row, whether or not the
procedure exists (so the refusal tells nothing about other tenants' names).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import principal_of, scope_of
from api.fields import StrictSerializer, check_body_scope, integer
from api.openapi import AGENT, BODY, Tags, errors
from api.permissions import HasAgentKey, HasPrincipal
from memory.errors import Forbidden
from procedures.models import ChangeProposal, ProcedureVersion
from procedures.selectors import (
    current_versions,
    proposal_get,
    proposals_of,
    version_get,
    versions_list,
    visible_procedure,
)
from procedures.services import MAX_BODY_CHARS, proposal_create, write_refused


class VersionSummaryOut(serializers.Serializer):
    name = serializers.CharField()
    scope = serializers.CharField(help_text="`org` or `project`.")
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["approved"], help_text="Only approved versions are served.")
    approved_by = serializers.CharField()
    approved_at = serializers.DateTimeField()
    change_summary = serializers.CharField()
    author = serializers.CharField()


class VersionOut(VersionSummaryOut):
    body = serializers.CharField(help_text="The instructions.")


class ProcedureListOut(serializers.Serializer):
    results = VersionSummaryOut(many=True, help_text="The current version of each procedure, by name.")


class VersionListOut(serializers.Serializer):
    name = serializers.CharField()
    results = VersionSummaryOut(many=True, help_text="Every version, oldest first.")


class ProposalOut(serializers.Serializer):
    proposal_id = serializers.CharField()
    procedure = serializers.CharField()
    base_version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=ChangeProposal.Status.choices,
                                     help_text="`stale`: its base is no longer current; a reviewer rebases or "
                                               "rejects it.")
    rationale = serializers.CharField()
    source_event_ids = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_reason = serializers.CharField()
    published_version = serializers.IntegerField(allow_null=True, help_text="The version an approval published.")


class ProposalListOut(serializers.Serializer):
    name = serializers.CharField()
    results = ProposalOut(many=True, help_text="The principal's own proposals, newest first (at most 100).")


def version_payload(v: ProcedureVersion, *, body: bool = True) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "name": v.procedure.name, "scope": v.procedure.scope, "version": v.number, "status": "approved",
        "approved_by": v.approved_by.get_username(), "approved_at": v.approved_at.isoformat(),
        "change_summary": v.change_summary, "author": v.author,
    }
    if body:
        payload["body"] = v.body
    return payload


def proposal_payload(p: ChangeProposal) -> dict[str, Any]:
    # Flags are for the reviewer only: showing them to the proposer would teach it to evade them.
    published = p.result_version if p.status == ChangeProposal.Status.APPROVED else None
    return {
        "proposal_id": p.pk, "procedure": p.procedure.name, "base_version": p.base_version.number,
        "status": p.status, "rationale": p.rationale, "source_event_ids": p.source_event_ids,
        "created_at": p.created_at.isoformat(), "decided_at": p.decided_at.isoformat() if p.decided_at else None,
        "decision_reason": p.decision_reason, "published_version": published.number if published else None,
    }


class _ReadOnly(APIView):
    """GET needs a principal; every write method is refused (and audited) for any agent key."""

    def get_permissions(self) -> list[BasePermission]:
        return [HasPrincipal() if self.request.method in SAFE_METHODS else HasAgentKey()]

    # Not an operation: the schema lists what agents may do, and this is what they may not.
    @extend_schema(exclude=True)
    def refuse(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        principal = principal_of(request)
        write_refused(tenant_id=principal.key.tenant_id, actor=principal.actor, method=request.method or "",
                      path=request.path, name=kwargs.get("name"))
        raise Forbidden("Procedures are read-only through the API: propose a change with "
                        "POST /api/v1/procedures/{name}/proposals; a reviewer publishes it.",
                        code="procedure_read_only")

    post = put = patch = delete = refuse


class ProcedureListApi(_ReadOnly):
    @extend_schema(operation_id="procedures_list", tags=[Tags.PROCEDURES], summary="The procedures the agent follows",
                   responses={200: ProcedureListOut, **errors(*AGENT)})
    def get(self, request: Request) -> Response:
        versions = current_versions(scope_of(request)).order_by("procedure__name")
        return Response({"results": [version_payload(v, body=False) for v in versions]})


class ProcedureDetailApi(_ReadOnly):
    @extend_schema(operation_id="procedure_get", tags=[Tags.PROCEDURES], summary="A procedure's current version",
                   responses={200: VersionOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, name: str) -> Response:
        return Response(version_payload(version_get(scope=scope_of(request), name=name)))


class VersionListApi(_ReadOnly):
    @extend_schema(operation_id="procedure_versions_list", tags=[Tags.PROCEDURES], summary="A procedure's versions",
                   responses={200: VersionListOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, name: str) -> Response:
        versions = versions_list(scope=scope_of(request), name=name)
        return Response({"name": name, "results": [version_payload(v, body=False) for v in versions]})


class VersionDetailApi(_ReadOnly):
    @extend_schema(operation_id="procedure_version_get", tags=[Tags.PROCEDURES], summary="One version of a procedure",
                   description="Versions are immutable.", responses={200: VersionOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, name: str, number: int) -> Response:
        return Response(version_payload(version_get(scope=scope_of(request), name=name, number=number)))


class ProposalListCreateApi(_ReadOnly):
    def get_permissions(self) -> list[BasePermission]:
        return [HasPrincipal() if self.request.method in ("GET", "HEAD", "OPTIONS", "POST") else HasAgentKey()]

    @extend_schema_serializer(component_name="Proposal")
    class ProposalIn(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, required=False)
        body = serializers.CharField(max_length=MAX_BODY_CHARS, trim_whitespace=False)
        rationale = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="",
                                          help_text="Why the change is needed.")
        base_version = integer(min_value=1, required=False,
                                                help_text="The version this change is written against "
                                                          "(default: the current one).")
        source_event_ids = serializers.ListField(child=serializers.CharField(max_length=128), max_length=50,
                                                 required=False, default=list)

    @extend_schema(
        operation_id="procedure_propose", tags=[Tags.PROCEDURES], summary="Propose a change to a procedure",
        description="The runtime may only propose: a reviewer sees the diff, the rationale and any poison flags, "
                    "and approving publishes the next version. Needs the `propose` scope.",
        request=ProposalIn,
        responses={201: ProposalOut, **errors(*BODY, *AGENT, "scope_mismatch", "not_found", "base_version_not_found",
                                              "empty_body", "secret_detected")})
    def post(self, request: Request, name: str) -> Response:
        scope = scope_of(request)
        check_body_scope(request.data, scope)
        data = self.ProposalIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        proposal = proposal_create(procedure=visible_procedure(scope=scope, name=name), body=d["body"], scope=scope,
                                   rationale=d.get("rationale", ""), base_number=d.get("base_version"),
                                   source_event_ids=d["source_event_ids"])
        return Response(proposal_payload(proposal), status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="procedure_proposals_list", tags=[Tags.PROCEDURES],
                   summary="The principal's proposals on a procedure",
                   responses={200: ProposalListOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, name: str) -> Response:
        mine = proposals_of(scope=scope_of(request), name=name)[:100]
        return Response({"name": name, "results": [proposal_payload(p) for p in mine]})


class ProposalDetailApi(_ReadOnly):
    @extend_schema(operation_id="procedure_proposal_get", tags=[Tags.PROCEDURES], summary="Follow a proposal",
                   responses={200: ProposalOut, **errors(*AGENT, "not_found")})
    def get(self, request: Request, name: str, proposal_id: str) -> Response:
        return Response(proposal_payload(proposal_get(scope=scope_of(request), name=name, proposal_id=proposal_id)))


@extend_schema(exclude=True)  # a catch-all that refuses, not an operation
class BelowProcedureApi(_ReadOnly):
    """Any other path under a procedure (e.g. /proposals/{id}/approve): 404 to read, refused to write."""

    def get(self, request: Request, name: str, rest: str) -> Response:
        return Response({"code": "not_found", "detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
