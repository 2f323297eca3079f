"""Operators revoke and rotate agent keys (command and admin); the next request sees it, and the principal
tokens a revoked key minted stop working with every other key of the tenant."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone

from memory.identity.services import agent_key_create, agent_key_rotate
from memory.models import AgentKey, AuditEntry
from tests.conftest import Agent

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


@pytest.fixture
def minting_agent(make_agent, tenant) -> Agent:
    return make_agent(tenant, subject=None, scopes=["read", "write", "mint"])


def mint(agent: Agent, subject: str = "usr_owner") -> str:
    response = agent.post("/api/v1/principal-tokens", {"subject_id": subject})
    assert response.status_code == 201, response.content
    return response.json()["token"]


def key_row(agent: Agent) -> AgentKey:
    return AgentKey.objects.get(prefix=agent.key[:12])


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def test_a_revoked_key_is_refused_on_the_next_request(agent):
    assert agent.get(URL).status_code == 200

    output = run("revoke_agent_key", agent.key[:12])

    response = agent.get(URL)
    assert response.status_code == 401 and response.json()["code"] == "invalid_key"
    assert "revoked" in output
    assert AuditEntry.objects.filter(action="agent_key.revoke").count() == 1


def test_revoking_a_key_ends_the_principal_tokens_it_minted(minting_agent, make_agent, tenant):
    other = make_agent(tenant, "usr_owner")
    token = mint(minting_agent)
    other.token = token
    assert other.get(URL).status_code == 200  # a token works with any key of its tenant

    run("revoke_agent_key", str(key_row(minting_agent).pk))

    response = other.get(URL)
    assert response.status_code == 401 and response.json()["code"] == "principal_revoked"


def test_tokens_of_other_keys_are_untouched(minting_agent, make_agent, tenant):
    second_minter = make_agent(tenant, subject=None, scopes=["read", "mint"])
    reader = make_agent(tenant, "usr_owner")
    reader.token = mint(second_minter)

    run("revoke_agent_key", minting_agent.key[:12])

    assert reader.get(URL).status_code == 200


def test_rotation_prints_a_working_key_and_the_old_one_stops(agent):
    output = run("rotate_agent_key", agent.key[:12])
    new_key = output.strip().splitlines()[-1]

    old = agent.get(URL)
    agent.key = new_key
    new = agent.get(URL)

    assert old.status_code == 401
    assert new.status_code == 200
    rows = AgentKey.objects.filter(tenant=agent.tenant).order_by("pk")
    assert [r.permissions for r in rows][0] == [r.permissions for r in rows][1]


def test_rotation_with_grace_keeps_the_old_key_until_it_ends(agent, monkeypatch):
    new, raw = agent_key_rotate(key=key_row(agent), grace_seconds=60)

    assert agent.get(URL).status_code == 200  # still in its grace period
    later = timezone.now() + timedelta(seconds=61)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert agent.get(URL).status_code == 401
    agent.key = raw
    assert agent.get(URL).status_code == 200


def test_rotating_a_revoked_key_is_refused(agent):
    run("revoke_agent_key", agent.key[:12])

    with pytest.raises(CommandError, match="already revoked"):
        run("rotate_agent_key", agent.key[:12])


def test_an_unknown_or_ambiguous_key_is_a_clear_error(tenant):
    agent_key_create(tenant=tenant, name="a", permissions=["read"])
    with pytest.raises(CommandError, match="No agent key"):
        run("revoke_agent_key", "egk_nothing")
    AgentKey.objects.update(prefix="egk_same")
    agent_key_create(tenant=tenant, name="b", permissions=["read"])
    AgentKey.objects.update(prefix="egk_same")
    with pytest.raises(CommandError, match="Several keys"):
        run("revoke_agent_key", "egk_same")


def test_it_revokes_a_key_named_by_the_whole_key(agent, make_agent, tenant):
    other = make_agent(tenant, "usr_owner")

    output = run("revoke_agent_key", agent.key)

    assert agent.get(URL).status_code == 401
    assert other.get(URL).status_code == 200
    assert f"{agent.key[:12]}…" in output and agent.key not in output


def test_it_rotates_a_key_named_by_the_whole_key(agent):
    output = run("rotate_agent_key", agent.key)
    old, agent.key = agent.key, output.strip().splitlines()[-1]

    assert agent.get(URL).status_code == 200
    agent.key = old
    assert agent.get(URL).status_code == 401


def test_it_does_not_repeat_an_unknown_whole_key_in_its_error(agent):
    wrong = agent.key[:-4] + "AAAA"

    with pytest.raises(CommandError, match="No agent key") as error:
        run("revoke_agent_key", wrong)

    assert wrong not in str(error.value)
    assert agent.get(URL).status_code == 200


@pytest.mark.parametrize("command", ["revoke_agent_key", "rotate_agent_key"])
def test_its_help_says_the_whole_key_is_accepted(command):
    from django.core.management import load_command_class

    parser = load_command_class("memory.identity", command).create_parser("manage.py", command)

    assert "whole key" in " ".join(parser.format_help().split())


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "op-pass-123")
    client.force_login(user)
    return client


def test_the_admin_revokes_selected_keys(operator, agent):
    key = key_row(agent)

    response = operator.post("/admin/memory/agentkey/", {"action": "revoke", "_selected_action": [key.pk]},
                             follow=True)

    assert response.status_code == 200
    assert agent.get(URL).status_code == 401


def test_the_admin_rotates_a_key_and_shows_the_new_secret_once(operator, agent):
    key = key_row(agent)

    response = operator.post("/admin/memory/agentkey/", {"action": "rotate", "_selected_action": [key.pk]},
                             follow=True)

    shown = [str(m) for m in response.context["messages"]]
    new_key = next(word for m in shown for word in m.split() if word.startswith("egk_") and len(word) > 20)
    assert agent.get(URL).status_code == 401
    agent.key = new_key
    assert agent.get(URL).status_code == 200
