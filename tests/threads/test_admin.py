"""Operators can inspect thread state in the admin, never edit or delete it there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.threads.conftest import append

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    client.force_login(get_user_model().objects.create_superuser("op", "op@example.com", "op-pass-123"))
    return client


@pytest.mark.parametrize("model", ["thread", "threadevent", "summary", "checkpoint", "toolcall"])
def test_every_model_has_a_changelist(operator, agent, thread_id, model):
    append(agent, thread_id, "Hello.")
    agent.post(f"/api/v1/threads/{thread_id}/summarize", {})

    assert operator.get(f"/admin/threads/{model}/").status_code == 200


def test_an_event_can_be_viewed_but_not_changed_or_deleted(operator, agent, thread_id):
    event_id = append(agent, thread_id, "Hello.").json()["event_id"]

    assert operator.get(f"/admin/threads/threadevent/{event_id}/change/").status_code == 200
    assert operator.post(f"/admin/threads/threadevent/{event_id}/change/", {"text": "x"}).status_code == 403
    assert operator.get(f"/admin/threads/threadevent/{event_id}/delete/").status_code == 403
