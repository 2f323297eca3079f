from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from api.authentication import principal_of
from api.principal import AgentPrincipal


class HasAgentKey(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.user, AgentPrincipal):
            raise exceptions.NotAuthenticated("An agent key is required: 'Authorization: Bearer <key>'.",
                                              code="not_authenticated")
        return True


class HasPrincipal(HasAgentKey):
    """Memory endpoints act for a subject: a verified principal token is required."""

    def has_permission(self, request: Request, view: Any) -> bool:
        super().has_permission(request, view)
        if principal_of(request).scope is None:
            raise exceptions.NotAuthenticated("A principal token is required: 'X-Engram-Principal: <token>'.",
                                              code="principal_required")
        return True
