"""The per-tenant knowledge cache version moves forward on every change and never goes back."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from memory.knowledge.cache import bump_knowledge_cache_version, knowledge_cache_version
from tests.knowledge.conftest import doc_body

pytestmark = pytest.mark.django_db(transaction=True)  # the bump runs on commit


def test_it_moves_forward_on_ingest_and_never_returns_to_an_old_value_after_eviction(agent, handbook):
    before = knowledge_cache_version(handbook.tenant_id)

    agent.post("/api/v1/documents", doc_body())
    after_ingest = knowledge_cache_version(handbook.tenant_id)
    cache.clear()  # eviction, or the deletion job's cache purge
    after_eviction = knowledge_cache_version(handbook.tenant_id)

    assert before < after_ingest < after_eviction
    assert bump_knowledge_cache_version(handbook.tenant_id) == after_eviction + 1
    assert knowledge_cache_version(handbook.tenant_id + 1) != after_eviction + 1  # per tenant
