"""The admin is for operators and read-mostly: records can be inspected, never edited or deleted there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.conftest import memory_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "op-pass-123")
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", ["tenant", "subject", "memoryclass", "agentkey", "memoryrecord", "candidate",
                                   "event", "conflict", "auditentry", "tombstone"])
def test_every_model_has_a_changelist(operator, model):
    assert operator.get(f"/admin/memory/{model}/").status_code == 200


def test_a_record_can_be_viewed_but_not_changed_or_deleted(operator, agent):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    assert operator.get(f"/admin/memory/memoryrecord/{memory_id}/change/").status_code == 200
    assert operator.post(f"/admin/memory/memoryrecord/{memory_id}/change/", {"text": "edited"}).status_code == 403
    assert operator.get(f"/admin/memory/memoryrecord/{memory_id}/delete/").status_code == 403


def test_the_agent_key_hash_is_not_shown(operator, agent):
    from memory.models import AgentKey

    key = AgentKey.objects.first()
    page = operator.get(f"/admin/memory/agentkey/{key.pk}/change/").content.decode()

    assert key.key_hash not in page


def test_an_operator_links_a_person_to_a_subject(operator, agent):
    """The link rows carry the subject's tenant (memory/sharding.py); the admin's form still lists and saves them."""
    from memory.models import SubjectUser

    alice = get_user_model().objects.create_user("alice", password="alice-pass-123")
    subject = agent.subject
    page = operator.get(f"/admin/memory/subject/{subject.pk}/change/").content.decode()
    assert 'name="users"' in page and "alice" in page

    response = operator.post(f"/admin/memory/subject/{subject.pk}/change/",
                             {"display_name": "Owner", "kind": "user", "users": [alice.pk]})

    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(subject.users.all()) == [alice]
    assert list(SubjectUser.objects.values_list("tenant_id", flat=True)) == [subject.tenant_id]
