"""The isolated tenant set a run plays in, and the principals it acts as.

In process (default): two fresh tenants ``eval-<ulid>-a`` and ``eval-<ulid>-b`` created with
``tenant_create`` (default memory classes), one agent key each (read/write/propose/mint), a reviewer
user for tenant a, and principal tokens minted per subject. They are removed at the end of the run
(``--keep`` leaves them, clearly named ``eval-…``, for inspection).

Via the API (``--via-api URL``): the operator's tenants. Key A (``--api-key`` / ENGRAM_EVAL_KEY) needs
read, write, propose and mint; key B (``--api-key-b`` / ENGRAM_EVAL_KEY_B, another tenant) is optional
and enables the cross-tenant probes. Every subject is ``eval-<ulid>-…``, fresh per run, and erased
through ``DELETE /api/v1/subject`` at the end.
"""

from __future__ import annotations

import time
from typing import Any

from ulid import ULID

from memory.consolidation.review import candidate_approve
from memory.evaluation.client import HttpTransport, InProcessTransport, Principal, Transport
from memory.identity.access import reviewer_of
from memory.identity.services import agent_key_create, principal_token_mint, tenant_create, user_create
from memory.models import Tenant


class Unsupported(Exception):
    """A step that needs the server's internals (a reviewer, a paused job) and is not in the API."""


class Realm:
    in_process = False
    has_tenant_b = False

    def __init__(self) -> None:
        self.run_id = "eval-" + str(ULID()).lower()
        self.subjects: dict[tuple[str, str], Principal] = {}

    def principal(self, tenant: str, external_id: str, namespaces: list[str] | None = None) -> Principal:
        raise NotImplementedError

    def approve(self, candidate_id: str) -> str:
        raise Unsupported("reviewer approvals happen in the review UI, not the agent API")

    def cleanup(self) -> list[str]:
        return []


class InProcessRealm(Realm):
    in_process = True
    has_tenant_b = True

    def __init__(self) -> None:
        super().__init__()
        self.transport: Transport = InProcessTransport()
        self.tenants = {t: tenant_create(slug=f"{self.run_id}-{t}", name=f"Evaluation {self.run_id} ({t})",
                                         actor="system:evaluate") for t in ("a", "b")}
        self.keys = {t: agent_key_create(tenant=tenant, name="evaluate", permissions=["read", "write", "propose",
                                                                                          "mint"],
                                         actor="system:evaluate")[1]
                     for t, tenant in self.tenants.items()}
        self.reviewer = user_create(tenant=self.tenants["a"], username=f"{self.run_id}-reviewer",
                                    password=str(ULID()), reviewer=True, actor="system:evaluate")

    def principal(self, tenant: str, external_id: str, namespaces: list[str] | None = None) -> Principal:
        token, _, _ = principal_token_mint(tenant=self.tenants[tenant], subject_external_id=external_id,
                                           namespaces=namespaces, actor="system:evaluate")
        return Principal(name=f"{tenant}:{external_id}", subject_external_id=external_id, key=self.keys[tenant],
                         token=token, transport=self.transport)

    def approve(self, candidate_id: str) -> str:
        return str(candidate_approve(reviewer=reviewer_of(self.reviewer), candidate_id=candidate_id).result.record.pk)

    def cleanup(self) -> list[str]:
        """Remove the run's tenants and reviewer. Rows that PROTECT others (records -> class, versions ->
        approver) are removed first, as the ProtectedError names them; everything belongs to the run."""
        from django.contrib.auth import get_user_model

        problems = []
        for tenant in self.tenants.values():
            problem = _delete_protected_first(Tenant.objects.filter(pk=tenant.pk))
            if problem:
                problems.append(f"tenant {tenant.slug} kept: {problem}")
        problem = _delete_protected_first(get_user_model().objects.filter(pk=self.reviewer.pk))
        if problem:
            problems.append(f"reviewer {self.reviewer.get_username()} kept: {problem}")
        return problems


def _delete_protected_first(queryset: Any, rounds: int = 12) -> str:
    from django.db import transaction
    from django.db.models import ProtectedError, RestrictedError

    for _ in range(rounds):
        try:
            with transaction.atomic():
                queryset.delete()
            return ""
        except (ProtectedError, RestrictedError) as exc:
            blockers = exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
            for obj in list(blockers):
                error = _delete_protected_first(type(obj)._default_manager.filter(pk=obj.pk), rounds - 1)
                if error:
                    return error
        except Exception as exc:  # noqa: BLE001 - leave it, clearly named, and say so
            return f"{type(exc).__name__}: {exc}"[:300]
    return "gave up after repeated protected rows"


class ApiRealm(Realm):
    def __init__(self, base_url: str, key_a: str, key_b: str | None = None) -> None:
        super().__init__()
        self.transport = HttpTransport(base_url)
        self.keys = {"a": key_a, **({"b": key_b} if key_b else {})}
        self.has_tenant_b = key_b is not None
        self.created: list[Principal] = []
        health = self.transport.request("GET", "/health", key=key_a, token=None)
        if health.status >= 500 or health.status == 404:
            raise RuntimeError(f"{base_url} does not answer /api/v1/health ({health.status}).")

    def principal(self, tenant: str, external_id: str, namespaces: list[str] | None = None) -> Principal:
        body: dict[str, Any] = {"subject_id": external_id, "ttl": 3600}
        if namespaces:
            body["namespaces"] = [ns.split("/") for ns in namespaces]
        response = self.transport.request("POST", "/principal-tokens", key=self.keys[tenant], token=None, body=body)
        if response.status != 201 and response.status != 200:
            raise RuntimeError(f"Minting a principal token failed ({response.status}): {response.text()[:300]}")
        principal = Principal(name=f"{tenant}:{external_id}", subject_external_id=external_id,
                              key=self.keys[tenant], token=response.body["token"], transport=self.transport)
        self.created.append(principal)
        return principal

    def cleanup(self) -> list[str]:
        problems: list[str] = []
        jobs: list[tuple[Principal, str]] = []
        seen = set()
        for principal in reversed(self.created):  # the newest token per subject (erasure re-mints)
            if principal.name in seen:
                continue
            seen.add(principal.name)
            response = principal.delete("/subject")
            if response.status == 202:
                jobs.append((principal, response.body["deletion_id"]))
            elif response.status not in (401, 404):
                problems.append(f"erasing {principal.name} answered {response.status}")
        # The erasures run on the server's worker; wait for them, so the run ends with nothing left.
        deadline = time.monotonic() + 120
        for principal, deletion_id in jobs:
            status = ""
            while time.monotonic() < deadline:
                status = principal.get(f"/deletions/{deletion_id}").body.get("status", "")
                if status in ("completed", "failed"):
                    break
                time.sleep(0.3)
            if status != "completed":
                problems.append(f"erasing {principal.name}: job {deletion_id} is {status or 'unknown'}")
        return problems
