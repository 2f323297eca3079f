"""End to end through a real `manage.py qcluster`: a batch write is searchable at once, semantically soon after."""

from __future__ import annotations

import pytest

from memory.models import MemoryRecord
from tests.conftest import memory_body, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_worker_fills_embeddings_for_a_batch(qcluster, agent):
    items = [memory_body(fact={"field": "seat_preference", "value": "aisle"}, text="Prefers aisle seats",
                         source={"type": "explicit_user_statement", "event_id": "evt_w1"}),
             memory_body(namespace=["user"], fact={"field": "home_city", "value": "Lisbon"}, text="Lives in Lisbon",
                         source={"type": "explicit_user_statement", "event_id": "evt_w2"})]
    assert agent.post("/api/v1/memories/batch", {"items": items}).json()["created"] == 2

    wait_for(lambda: not MemoryRecord.objects.filter(embedding__isnull=True).exists(), timeout=60)

    body = agent.post("/api/v1/retrieve", {"query": "I like sitting by the corridor on planes"}).json()
    assert body["packets"][0]["fact"] == "Prefers aisle seats"
    assert "semantic_pending" not in body["dropped"]
