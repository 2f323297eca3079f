"""Operator commands: create_tenant, create_agent_key, mint_principal_token, create_user, load_policy, seed_demo."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory.models import AgentKey, MemoryClass, MemoryRecord, Subject, Tenant

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip().splitlines()


def test_create_tenant_installs_the_default_classes():
    run("create_tenant", "initech")

    prefixes = set(MemoryClass.objects.filter(tenant__slug="initech").values_list("namespace_prefix", flat=True))
    assert {"user", "org"} <= prefixes


def test_create_tenant_refuses_a_duplicate():
    run("create_tenant", "initech")
    with pytest.raises(CommandError):
        run("create_tenant", "initech")


def test_create_agent_key_prints_the_key_alone_on_the_last_line_and_stores_only_its_hash(tenant):
    raw = run("create_agent_key", "--tenant", "acme", "--name", "bot", "--scopes", "read,mint")[-1]

    key = AgentKey.objects.get(name="bot")
    assert raw.startswith("egk_") and " " not in raw
    assert key.permissions == ["mint", "read"]
    assert raw not in key.key_hash and key.key_hash != raw


def test_create_agent_key_defaults_to_read_write_propose(tenant):
    run("create_agent_key", "--tenant", "acme", "--name", "bot")

    assert AgentKey.objects.get(name="bot").permissions == ["propose", "read", "write"]


def test_create_agent_key_refuses_an_unknown_scope(tenant):
    with pytest.raises(CommandError):
        run("create_agent_key", "--tenant", "acme", "--name", "bot", "--scopes", "read,admin")


def test_a_command_on_a_missing_tenant_says_so():
    with pytest.raises(CommandError, match="No tenant"):
        run("create_agent_key", "--tenant", "nope", "--name", "bot")


def test_minted_key_and_token_work_together_against_the_api(tenant):
    key = run("create_agent_key", "--tenant", "acme", "--name", "bot")[-1]
    token = run("mint_principal_token", "--tenant", "acme", "--subject", "usr_cli", "--ttl", "60")[-1]

    response = APIClient().get("/api/v1/memories", HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_X_ENGRAM_PRINCIPAL=token)

    assert response.status_code == 200
    assert Subject.objects.get(external_id="usr_cli").kind == "user"


def test_create_user_links_a_subject_and_grants_review(tenant):
    run("create_user", "--tenant", "acme", "--username", "rita", "--password", "pw-123456", "--reviewer",
        "--subject", "usr_rita")

    user = get_user_model().objects.get(username="rita")
    assert user.check_password("pw-123456")
    assert list(user.reviewer_tenants.all()) == [tenant]
    assert user.subjects.get().external_id == "usr_rita"


def test_load_policy_replaces_the_classes_from_json(tenant, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps([
        {"name": "prefs", "namespace_prefix": "user/prefs", "model_permission": "write", "default_ttl": 30},
        {"name": "company", "namespace_prefix": "org", "model_permission": "read"},
    ]))

    run("load_policy", "--tenant", "acme", str(path))

    classes = {c.name: c for c in MemoryClass.objects.filter(tenant=tenant)}
    assert set(classes) == {"prefs", "company"}
    assert classes["prefs"].default_ttl.days == 30


def test_load_policy_reads_yaml(tenant, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("- name: prefs\n  namespace_prefix: user\n  model_permission: propose\n")

    run("load_policy", "--tenant", "acme", str(path))

    assert MemoryClass.objects.get(tenant=tenant).model_permission == "propose"


def test_load_policy_refuses_a_bad_file_and_changes_nothing(tenant, tmp_path):
    before = MemoryClass.objects.filter(tenant=tenant).count()
    path = tmp_path / "policy.json"
    path.write_text(json.dumps([{"name": "x", "namespace_prefix": "user", "colour": "blue"}]))

    with pytest.raises(CommandError, match="colour"):
        run("load_policy", "--tenant", "acme", str(path))
    assert MemoryClass.objects.filter(tenant=tenant).count() == before


def test_seed_demo_is_idempotent(tmp_path):
    key_file = tmp_path / "key"
    run("seed_demo", "--key-file", str(key_file))
    key = key_file.read_text()
    counts = (Tenant.objects.count(), MemoryRecord.objects.count(), get_user_model().objects.count())
    run("seed_demo", "--key-file", str(key_file))

    assert key_file.read_text() == key

    assert (Tenant.objects.count(), MemoryRecord.objects.count(), get_user_model().objects.count()) == counts
    assert MemoryRecord.objects.filter(subject__external_id="usr_alice", status="active").count() >= 4


def test_seed_demo_leaves_every_flow_something_to_show_once(tmp_path):
    from memory.deletion.models import DeletionJob
    from memory.models import Candidate, Conflict
    from memory.retrieval.models import RetrievalLog
    from procedures.models import ChangeProposal

    def state():
        return {
            "review": Candidate.objects.filter(status="review").count(),
            "served_guesses": Candidate.objects.filter(status="retrievable").count(),
            "conflicts": Conflict.objects.filter(status="open").count(),
            "proposals": ChangeProposal.objects.filter(status="pending").count(),
            "deletions": list(DeletionJob.objects.values_list("status", flat=True)),
            "retrievals": RetrievalLog.objects.count(),
            "records": MemoryRecord.objects.count(),
        }

    run("seed_demo", "--key-file", str(tmp_path / "key"))
    first = state()
    run("seed_demo", "--key-file", str(tmp_path / "key"))

    assert first == {"review": 3, "served_guesses": 1, "conflicts": 1, "proposals": 1, "deletions": ["completed"],
                     "retrievals": 1, "records": first["records"]}
    assert state() == first
    log = RetrievalLog.objects.get()
    outcomes = [bool(c.get("selected")) for c in log.candidates]
    assert True in outcomes and False in outcomes, log.candidates  # kept and dropped
    alice = Subject.objects.get(external_id="usr_alice")
    assert alice.name == "Alice Martin"
    assert Candidate.objects.filter(status="review", field="seat_preference").get().conflict_record_id is not None
