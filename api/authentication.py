"""Agent authentication: ``Authorization: Bearer <agent key>`` + ``X-Engram-Principal: <token>`` -> Scope.

Scope is resolved here, once, so views and selectors never decide who the caller is. The effective
namespaces are the intersection of the key's and the token's grants.
"""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from api.prefetch import bearer_key, forget_key, remember_key
from api.principal import AgentPrincipal
from api.throttling import count_failed_key
from memory.identity.services import (
    PrincipalClaims,
    TokenInvalid,
    agent_key_is_active,
    agent_key_lookup,
    principal_token_verify,
)
from memory.models import AgentKey
from memory.namespaces import intersect_prefixes
from memory.scope import READ, Scope

PRINCIPAL_HEADER = "HTTP_X_ENGRAM_PRINCIPAL"


class AgentKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AgentPrincipal, AgentKey] | None:
        if not request.META.get("HTTP_AUTHORIZATION", ""):
            return None
        raw_key = bearer_key(request)
        if raw_key is None:
            raise exceptions.AuthenticationFailed("Use 'Authorization: Bearer <agent key>'.", code="invalid_key")
        token = request.META.get(PRINCIPAL_HEADER, "").strip()
        claims: PrincipalClaims | None = None
        token_error: TokenInvalid | None = None
        if token:
            # Verified first (no database), so the key's query can read the token's subject too; a bad key
            # is still reported before a bad token.
            try:
                claims = principal_token_verify(token)
            except TokenInvalid as exc:
                token_error = exc
        key = agent_key_lookup(raw_key,
                               subject_external_id=claims.subject_external_id if claims is not None else None)
        if key is None:
            forget_key(raw_key)
            count_failed_key(request)
            raise exceptions.AuthenticationFailed("The agent key is not valid or was revoked.", code="invalid_key")
        if READ in key.permissions:  # a key that may not read has no retrieve to start early
            remember_key(raw_key, key.pk)
        if token_error is not None:
            raise exceptions.AuthenticationFailed(token_error.detail, code=token_error.code) from token_error
        scope = self._scope(key, claims) if claims is not None else None
        return AgentPrincipal(key, scope), key

    def _scope(self, key: AgentKey, claims: PrincipalClaims) -> Scope:
        if claims.tenant_id != key.tenant_id:
            raise exceptions.PermissionDenied(
                "The principal token belongs to another tenant than the agent key.", code="tenant_mismatch"
            )
        # A token lives only as long as the key that minted it (the presenting key was just checked).
        if claims.key_id is not None and claims.key_id != key.pk and not agent_key_is_active(claims.key_id):
            raise exceptions.AuthenticationFailed("The key that minted this principal token was revoked.",
                                                  code="principal_revoked")
        subject_id = getattr(key, "principal_subject_id", None)  # read with the key (agent_key_lookup)
        if subject_id is None:
            raise exceptions.AuthenticationFailed("The token's subject no longer exists.", code="invalid_principal")
        return Scope.for_agent(tenant_id=key.tenant_id, subject_id=subject_id,
                               subject_external_id=claims.subject_external_id, agent_key_id=key.pk,
                               permissions=key.permissions, namespaces=grant_of(key, claims))

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="engram"'


def grant_of(key: AgentKey, claims: PrincipalClaims) -> tuple[str, ...] | None:
    """The namespaces a request may reach: the key's prefixes intersected with the token's grants."""
    prefixes = intersect_prefixes(key.namespaces, claims.namespaces)
    return None if prefixes is None else tuple(prefixes)


def principal_of(request: Request) -> AgentPrincipal:
    """The authenticated agent of a request (the permission classes guarantee there is one)."""
    user = request.user
    if not isinstance(user, AgentPrincipal):
        raise exceptions.NotAuthenticated("An agent key is required.", code="not_authenticated")
    return user


def scope_of(request: Request) -> Scope:
    """The request's scope; HasPrincipal guarantees a principal token was verified."""
    scope = principal_of(request).scope
    if scope is None:
        raise exceptions.NotAuthenticated("A principal token is required.", code="principal_required")
    return scope
