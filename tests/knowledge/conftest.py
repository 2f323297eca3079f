"""Knowledge fixtures: access domains created through the service, documents through the API."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def make_domain(db: Any) -> Any:
    from memory.knowledge.services import access_domain_create

    def make(tenant: Any, name: str = "handbook", subjects: tuple[str, ...] = ("usr_owner",),
             kinds: tuple[str, ...] = (), all_subjects: bool = False) -> Any:
        return access_domain_create(tenant=tenant, name=name, subject_external_ids=subjects, reader_kinds=kinds,
                                    all_subjects=all_subjects)

    return make


@pytest.fixture
def handbook(make_domain: Any, tenant: Any, agent: Any) -> Any:
    """Domain 'handbook' of tenant acme, readable by usr_owner only."""
    return make_domain(tenant, "handbook")


def doc_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "access_domain": "handbook",
        "external_id": "refunds.md",
        "title": "Refund policy",
        "text": "Customers may request a refund within 30 days of purchase. Refunds go to the original card.",
        "uri": "https://docs.example.com/refunds",
        "metadata": {"team": "support"},
    }
    body.update(overrides)
    return body


def scope_for(agent: Any) -> Any:
    """The Scope an agent's requests carry (built the way authentication builds it)."""
    from memory.scope import Scope

    return Scope(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk, subject_external_id=agent.subject.external_id,
                 permissions=frozenset({"read", "write"}), namespaces=None, actor="test")


def search(agent_or_scope: Any, text: str, limit: int = 20, filters: dict | None = None) -> list[Any]:
    """Call the knowledge provider the way the retrieval pipeline does."""
    from memory.embedder import get_embedder
    from memory.retrieval.sources import RetrievalQuery, provider
    from memory.scope import Scope

    scope = agent_or_scope if isinstance(agent_or_scope, Scope) else scope_for(agent_or_scope)
    fn = provider("knowledge")
    assert fn is not None
    return fn(scope, RetrievalQuery(text=text, vector=get_embedder().embed_query(text), limit=limit,
                                    filters=filters or {}))
