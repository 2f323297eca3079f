"""manage.py reembed and import_memories."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.models import MemoryRecord
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db


def test_reembed_fills_missing_embeddings_and_is_idempotent(agent, remember):
    remember(agent, "Prefers aisle seats", field="seat", value="aisle", embed=False)
    remember(agent, "Lives in Lisbon", field="city", value="Lisbon", embed=False)
    assert retrieve(agent, "aisle")["dropped"]["semantic_pending"] == 2

    out = StringIO()
    call_command("reembed", "--tenant", "acme", stdout=out)
    assert "embeddings written: 2" in out.getvalue()
    assert not MemoryRecord.objects.filter(embedding__isnull=True).exists()
    assert "semantic_pending" not in retrieve(agent, "aisle")["dropped"]

    again = StringIO()
    call_command("reembed", "--tenant", "acme", stdout=again)
    assert "embeddings written: 0" in again.getvalue()


def test_reembed_refuses_an_unknown_tenant():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("reembed", "--tenant", "nope")


def test_import_memories_writes_validates_and_replays(tenant, tmp_path, agent, sync_tasks):
    lines = [json.dumps({"subject_id": "usr_owner", "namespace": ["user"], "kind": "preference",
                         "fact": {"field": f"f{n}", "value": f"v{n}"}, "text": f"Imported fact {n}",
                         "source": {"type": "explicit_user_statement", "event_id": f"evt_i{n}"}}) for n in range(3)]
    lines.append(json.dumps({"subject_id": "usr_new", "namespace": ["nowhere"], "kind": "x",
                             "fact": {"field": "f", "value": 1}}))
    lines.append("not json")
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(lines) + "\n")

    out = StringIO()
    call_command("import_memories", str(path), "--tenant", "acme", "--embed", stdout=out)
    assert "created 3, existing 0, errors 2; embeddings pending: 0" in out.getvalue()
    assert "class_not_allowed" in out.getvalue()
    assert [p["fact"] for p in retrieve(agent, "Imported fact 1")["packets"]][0] == "Imported fact 1"

    again = StringIO()
    call_command("import_memories", str(path), "--tenant", "acme", stdout=again)
    assert "created 0, existing 3, errors 2" in again.getvalue()
    assert MemoryRecord.objects.count() == 3


def test_reembed_rebuilds_the_full_text_vectors_too(agent, remember):
    memory_id = remember(agent, "Order ORD-4417 ships on Friday", field="order", value="ORD-4417")
    MemoryRecord.objects.filter(pk=memory_id).update(search_vector=None)
    assert retrieve(agent, "ORD-4417")["packets"][0]["memory_id"] == memory_id  # still found semantically ...
    assert MemoryRecord.objects.filter(search_vector="ORD-4417").count() == 0  # ... but not lexically

    call_command("reembed", "--tenant", "acme", stdout=StringIO())

    assert MemoryRecord.objects.filter(search_vector="ORD-4417").count() == 1
    log = agent.get(f"/api/v1/retrievals/{retrieve(agent, 'ORD-4417')['retrieval_id']}").json()
    assert next(c for c in log["candidates"] if c.get("memory_id") == memory_id)["lexical_rank"] == 1


def test_import_without_embed_reports_pending_embeddings_like_health_and_retrieve(tenant, tmp_path, agent, capsys):
    lines = [json.dumps({"subject_id": "usr_owner", "namespace": ["user"], "kind": "preference",
                         "fact": {"field": f"f{n}", "value": f"v{n}"}, "text": f"Imported fact {n}",
                         "source": {"type": "explicit_user_statement", "event_id": f"evt_p{n}"}}) for n in range(4)]
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(lines) + "\n")

    out = StringIO()
    call_command("import_memories", str(path), "--tenant", "acme", stdout=out)

    assert "created 4, existing 0, errors 0; embeddings pending: 4" in out.getvalue()
    assert "importing" in capsys.readouterr().out  # the progress bar
    assert APIClient().get("/api/v1/health").json()["embeddings_pending"] == 4
    body = retrieve(agent, "Imported fact 2")
    assert body["dropped"]["semantic_pending"] == 4
    assert body["packets"][0]["fact"] == "Imported fact 2"  # durable and lexically searchable already

    call_command("reembed", "--tenant", "acme", stdout=StringIO())
    assert APIClient().get("/api/v1/health").json()["embeddings_pending"] == 0
