"""Tenants, subjects, agent keys, principal tokens and UI users."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from memory.audit import audit
from memory.errors import Forbidden, InvalidInput, SecretDetected
from memory.models import AgentKey, MemoryClass, MemoryRecord, Subject, Tenant
from memory.namespaces import InvalidNamespace, is_under, to_path
from memory.policy.defaults import DEFAULT_CLASSES
from memory.policy.secrets import describe, scan_payload
from memory.scope import ALL_PERMISSIONS, MINT, require_permission

KEY_PREFIX = "egk_"
TOKEN_PREFIX = "ept_"
PREFIX_CHARS = 12  # how much of a key is kept in clear (AgentKey.prefix) to name it
_TOKEN_SALT = "engram.principal-token.v1"


def hash_key(raw_key: str) -> str:
    # Keys are 256-bit random strings, so a plain SHA-256 is enough (no password-style KDF needed).
    return hashlib.sha256(raw_key.encode()).hexdigest()


@transaction.atomic
def tenant_create(*, slug: str, name: str = "", default_classes: bool = True, actor: str = "system") -> Tenant:
    if Tenant.objects.filter(slug=slug).exists():
        raise InvalidInput(f"Tenant '{slug}' already exists.", code="tenant_exists", status=409)
    tenant = Tenant.objects.create(slug=slug, name=name or slug)
    if default_classes:
        MemoryClass.objects.bulk_create(MemoryClass(tenant=tenant, **spec) for spec in DEFAULT_CLASSES)
    audit(actor=actor, action="tenant.create", object_type="tenant", object_id=str(tenant.pk), tenant_id=tenant.pk)
    return tenant


def subject_get_or_create(*, tenant: Tenant, external_id: str, kind: str = Subject.Kind.USER) -> Subject:
    if not external_id or len(external_id) > 128:
        raise InvalidInput("A subject id is 1 to 128 characters.")
    try:
        with transaction.atomic():
            subject, _ = Subject.objects.get_or_create(tenant=tenant, external_id=external_id,
                                                       defaults={"kind": kind})
    except IntegrityError:  # a concurrent request created it first
        subject = Subject.objects.get(tenant=tenant, external_id=external_id)
    return subject


MAX_DISPLAY_NAME = 200


def subject_display_name_set(*, subject: Subject, display_name: str, actor: str = "system") -> Subject:
    """Name the subject for people's pages ("" goes back to the linked person's name). Audited; a name that
    looks like a secret is refused, as for any identifier that is stored and shown."""
    name = " ".join(display_name.split())  # no newlines or runs of spaces in a name shown on one line
    if len(name) > MAX_DISPLAY_NAME or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidInput(f"A display name is at most {MAX_DISPLAY_NAME} printable characters.",
                           code="invalid_display_name")
    if name == subject.display_name:
        return subject
    if name:
        refuse_secret_identifier("display_name", name)
    Subject.objects.filter(pk=subject.pk).update(display_name=name)
    subject.display_name = name
    # The name itself is personal data: the audit row says it changed, not what it is.
    audit(actor=actor, action="subject.display_name", object_type="subject", object_id=str(subject.pk),
          tenant_id=subject.tenant_id, subject_id=subject.pk, data={"set": bool(name)})
    return subject


def _validate_permissions(permissions: list[str]) -> list[str]:
    unknown = sorted(set(permissions) - set(ALL_PERMISSIONS))
    if unknown:
        raise InvalidInput(f"Unknown scope(s) {', '.join(unknown)}; use any of {', '.join(ALL_PERMISSIONS)}.")
    return sorted(set(permissions))


def _validate_namespaces(namespaces: list[str] | None) -> list[str] | None:
    if not namespaces:
        return None
    try:
        return sorted({to_path(ns) for ns in namespaces})
    except InvalidNamespace as exc:
        raise InvalidInput(str(exc), code="invalid_namespace") from exc


@transaction.atomic
def agent_key_create(*, tenant: Tenant, name: str, permissions: list[str],
                     namespaces: list[str] | None = None, actor: str = "system") -> tuple[AgentKey, str]:
    """Create a key and return it with the raw secret, which is never stored and never shown again."""
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = AgentKey.objects.create(
        tenant=tenant, name=name, prefix=raw[:PREFIX_CHARS], key_hash=hash_key(raw),
        permissions=_validate_permissions(permissions), namespaces=_validate_namespaces(namespaces),
    )
    audit(actor=actor, action="agent_key.create", object_type="agent_key", object_id=str(key.pk),
          tenant_id=tenant.pk, data={"permissions": key.permissions, "namespaces": key.namespaces})
    return key, raw


def active_keys() -> Any:
    """Keys not revoked, or revoked with a grace period that has not ended yet (a rotation's old key)."""
    return AgentKey.objects.filter(Q(revoked_at__isnull=True) | Q(revoked_at__gt=timezone.now()))


# Every API request runs this. Built by the ORM (a filter, select_related and a subquery annotation) the
# statement cost about 2 ms of Python per request to compile, four times the query itself; raw() with a fixed text
# keeps the ORM's instances and field conversions (measured on a 2-core host: 2.8 → 0.7 ms a lookup).
_KEY_SQL = (
    f"SELECT k.*, (SELECT s.id FROM {Subject._meta.db_table} s WHERE s.tenant_id = k.tenant_id "
    f"AND s.external_id = %s ORDER BY s.id LIMIT 1) AS principal_subject_id "
    f"FROM {AgentKey._meta.db_table} k WHERE k.key_hash = %s AND (k.revoked_at IS NULL OR k.revoked_at > %s)"
)


def agent_key_lookup(raw_key: str, *, subject_external_id: str | None = None) -> AgentKey | None:
    """The active key for a raw key (as ``active_keys``). Read from the database on every request, with no cache
    in between: a revocation takes effect on the next request, on every node. The same query also reads the id of
    the subject ``subject_external_id`` in the key's tenant (``principal_subject_id``, None when there is no such
    subject, or none was asked for): a request's key and principal cost one round trip."""
    if not raw_key.startswith(KEY_PREFIX):
        return None
    found = list(AgentKey.objects.raw(_KEY_SQL, [subject_external_id, hash_key(raw_key), timezone.now()]))
    return found[0] if found else None


def agent_key_is_active(key_id: int) -> bool:
    return active_keys().filter(pk=key_id).exists()


@transaction.atomic
def agent_key_revoke(*, key: AgentKey, actor: str = "system", grace_seconds: int = 0) -> AgentKey:
    """Revoke ``key`` (after ``grace_seconds``): from then on neither the key nor any principal token it
    minted is accepted. Revoking a revoked key keeps the earlier time."""
    key = AgentKey.objects.select_for_update().get(pk=key.pk)
    at = timezone.now() + timedelta(seconds=max(0, grace_seconds))
    if key.revoked_at is None or key.revoked_at > at:
        key.revoked_at = at
        key.save(update_fields=["revoked_at"])
        audit(actor=actor, action="agent_key.revoke", object_type="agent_key", object_id=str(key.pk),
              tenant_id=key.tenant_id, data={"revoked_at": at.isoformat(), "grace_seconds": grace_seconds})
    return key


@transaction.atomic
def agent_key_rotate(*, key: AgentKey, actor: str = "system", grace_seconds: int = 0) -> tuple[AgentKey, str]:
    """A new key with the same tenant, scopes and namespaces; the old one is revoked after ``grace_seconds``
    (0: at once), and with it the principal tokens it minted. Returns the new key and its raw secret."""
    old = AgentKey.objects.select_for_update().get(pk=key.pk)
    if old.revoked_at is not None and old.revoked_at <= timezone.now():
        raise InvalidInput("This key is already revoked; create a new one instead.", code="key_revoked", status=409)
    new, raw = agent_key_create(tenant=old.tenant, name=old.name, permissions=list(old.permissions),
                                namespaces=old.namespaces, actor=actor)
    agent_key_revoke(key=old, actor=actor, grace_seconds=grace_seconds)
    audit(actor=actor, action="agent_key.rotate", object_type="agent_key", object_id=str(old.pk),
          tenant_id=old.tenant_id, data={"replaced_by": new.pk, "grace_seconds": grace_seconds})
    return new, raw


def agent_key_find(reference: str, *, tenant: Tenant | None = None) -> AgentKey:
    """A key by id, by the prefix shown at creation and in the admin (``egk_AbCdEfGh``), or by the whole
    key (matched by its SHA-256, the only form it is stored in; never repeated in a message)."""
    keys = AgentKey.objects.select_related("tenant")
    if tenant is not None:
        keys = keys.filter(tenant=tenant)
    whole = reference.startswith(KEY_PREFIX) and len(reference) > PREFIX_CHARS
    if reference.isdigit():
        matches = list(keys.filter(pk=int(reference)))
    elif whole:
        matches = list(keys.filter(key_hash=hash_key(reference)))
    else:
        matches = list(keys.filter(prefix=reference))
    if not matches:
        shown = f"{reference[:PREFIX_CHARS]}…" if whole else reference
        raise InvalidInput(f"No agent key '{shown}'.", code="not_found", status=404)
    if len(matches) > 1:
        raise InvalidInput(f"Several keys start with '{reference}'; give the key's id.", code="ambiguous")
    return matches[0]


@dataclass(frozen=True)
class PrincipalClaims:
    tenant_id: int
    subject_external_id: str
    namespaces: list[str] | None
    expires_at: int
    key_id: int | None = None  # the agent key that minted it (None: minted by an operator's command)


class TokenInvalid(Exception):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def refuse_secret_identifier(name: str, value: str) -> None:
    """An identifier is stored and shown (audit rows, exports, URLs): a secret must not become one."""
    findings = scan_payload({name: value})
    if findings:
        raise SecretDetected(describe(findings))


def principal_token_mint(*, tenant: Tenant, subject_external_id: str, ttl: int | None = None,
                         namespaces: list[str] | None = None, actor: str = "system",
                         minted_by: AgentKey | None = None,
                         display_name: str | None = None) -> tuple[str, Subject, int]:
    """Sign a token naming tenant + subject (+ namespace grants). Creates a user subject if none exists.

    ``minted_by`` is the agent key asking (None for an operator's command): it needs the mint scope,
    and the token is never wider than the key. A restricted key mints tokens restricted to its own
    prefixes by default, and asking for a namespace outside them is 403 ``namespace_forbidden``
    (the token would otherwise widen any other key of the tenant it is sent with). A token minted by a key
    carries the key's id and is accepted only while that key is active: revoking a key ends its tokens too.
    ``display_name`` (the backend knows its user's name) names the subject on people's pages."""
    if minted_by is not None:
        require_permission(minted_by.permissions, MINT)
    refuse_secret_identifier("subject_id", subject_external_id)
    max_ttl = settings.ENGRAM_PRINCIPAL_TOKEN_MAX_TTL
    ttl = settings.ENGRAM_PRINCIPAL_TOKEN_TTL if ttl is None else ttl
    if not 1 <= ttl <= max_ttl:
        raise InvalidInput(f"ttl must be between 1 and {max_ttl} seconds.",
                           code="invalid_ttl")
    grants = _validate_namespaces(namespaces)
    if minted_by is not None and minted_by.namespaces is not None:
        grants = _within_key(grants, minted_by.namespaces)
    subject = subject_get_or_create(tenant=tenant, external_id=subject_external_id)
    if display_name is not None:
        subject = subject_display_name_set(subject=subject, display_name=display_name, actor=actor)
    expires_at = int(time.time()) + ttl
    payload: dict[str, Any] = {"t": tenant.pk, "s": subject.external_id, "exp": expires_at}
    if minted_by is not None:
        payload["k"] = minted_by.pk
    if grants is not None:
        payload["ns"] = grants
    token = TOKEN_PREFIX + signing.dumps(payload, salt=_TOKEN_SALT, compress=True)
    audit(actor=actor, action="principal_token.mint", object_type="subject", object_id=str(subject.pk),
          tenant_id=tenant.pk, subject_id=subject.pk, data={"ttl": ttl, "namespaces": grants})
    return token, subject, expires_at


def _within_key(grants: list[str] | None, key_prefixes: list[str]) -> list[str]:
    if grants is None:
        return sorted(key_prefixes)
    outside = [g for g in grants if not any(is_under(g, p) for p in key_prefixes)]
    if outside:
        raise Forbidden(f"The agent key may not grant namespace(s) {', '.join(outside)}.", code="namespace_forbidden")
    return grants


def principal_token_verify(token: str) -> PrincipalClaims:
    if not token.startswith(TOKEN_PREFIX):
        raise TokenInvalid("invalid_principal", "The principal token is malformed.")
    try:
        payload = signing.loads(token[len(TOKEN_PREFIX):], salt=_TOKEN_SALT)
    except signing.BadSignature as exc:
        raise TokenInvalid("invalid_principal", "The principal token's signature is not valid.") from exc
    if not isinstance(payload, dict) or not {"t", "s", "exp"} <= payload.keys():
        raise TokenInvalid("invalid_principal", "The principal token is malformed.")
    if payload["exp"] < time.time():
        raise TokenInvalid("principal_expired", "The principal token has expired; mint a new one.")
    return PrincipalClaims(tenant_id=int(payload["t"]), subject_external_id=str(payload["s"]),
                           namespaces=payload.get("ns"), expires_at=int(payload["exp"]),
                           key_id=int(payload["k"]) if "k" in payload else None)


@transaction.atomic
def user_create(*, tenant: Tenant, username: str, password: str, reviewer: bool = False,
                subject_external_id: str | None = None, actor: str = "system") -> AbstractUser:
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User.objects.create_user(username=username, password=password)
    else:
        user.set_password(password)
        user.save(update_fields=["password"])
    if reviewer:
        tenant.reviewers.add(user)
    if subject_external_id:
        subject = subject_get_or_create(tenant=tenant, external_id=subject_external_id)
        subject.users.add(user, through_defaults={"tenant_id": tenant.pk})
    audit(actor=actor, action="user.create", object_type="user", object_id=str(user.pk), tenant_id=tenant.pk,
          data={"reviewer": reviewer, "subject": bool(subject_external_id)})
    return user  # type: ignore[return-value]


CLASS_FIELDS = {f.name for f in MemoryClass._meta.get_fields() if f.concrete} - {"id", "tenant", "created_at"}


@transaction.atomic
def memory_classes_load(*, tenant: Tenant, classes: list[dict[str, Any]], actor: str = "system") -> int:
    """Replace the tenant's classes with ``classes``. Refused if a class in use would disappear."""
    from datetime import timedelta

    specs = []
    for raw in classes:
        unknown = set(raw) - CLASS_FIELDS
        if unknown:
            raise InvalidInput(f"Unknown memory class field(s): {', '.join(sorted(unknown))}.")
        if "name" not in raw or "namespace_prefix" not in raw:
            raise InvalidInput("Each memory class needs a name and a namespace_prefix.")
        spec = dict(raw)
        try:
            spec["namespace_prefix"] = to_path(spec["namespace_prefix"])
        except InvalidNamespace as exc:
            raise InvalidInput(str(exc), code="invalid_namespace") from exc
        for duration in ("default_ttl", "max_retention"):
            if spec.get(duration) is not None:
                spec[duration] = timedelta(days=float(spec[duration]))  # files give days
        specs.append(spec)
    names = {s["name"] for s in specs}
    in_use = set(MemoryRecord.objects.filter(tenant=tenant).exclude(memory_class__name__in=names)
                 .values_list("memory_class__name", flat=True).distinct())
    if in_use:
        raise InvalidInput(f"Classes still hold records and cannot be removed: {', '.join(sorted(in_use))}.",
                           code="class_in_use", status=409)
    MemoryClass.objects.filter(tenant=tenant).exclude(name__in=names).delete()
    for spec in specs:
        MemoryClass.objects.update_or_create(tenant=tenant, name=spec["name"], defaults=spec)
    audit(actor=actor, action="policy.load", object_type="tenant", object_id=str(tenant.pk), tenant_id=tenant.pk,
          data={"classes": sorted(names)})
    return len(specs)
