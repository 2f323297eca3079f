"""manage.py publish_procedure: the operator's bootstrap, only in a reviewer's name, audited."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from memory.identity.services import user_create
from memory.models import AuditEntry
from procedures.models import Procedure, ProcedureVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def body_file(tmp_path):
    path = tmp_path / "refunds.md"
    path.write_text("Refund within 14 days.\n", encoding="utf-8")
    return str(path)


def test_it_publishes_version_one_then_two(tenant, reviewer, body_file, capsys):
    call_command("publish_procedure", tenant="acme", name="refunds", file=body_file, reviewer="rita")
    call_command("publish_procedure", tenant="acme", name="refunds", file=body_file, reviewer="rita",
                 summary="Same text, new version")

    assert "published acme/refunds version 2" in capsys.readouterr().out
    versions = list(ProcedureVersion.objects.order_by("number"))
    assert [v.number for v in versions] == [1, 2] and versions[1].change_summary == "Same text, new version"
    assert versions[0].approved_by == reviewer
    assert AuditEntry.objects.filter(action="procedure.publish", actor=f"user:{reviewer.pk}").count() == 2


def test_it_creates_a_project_procedure_with_members(tenant, reviewer, agent, body_file):
    call_command("publish_procedure", tenant="acme", name="release", file=body_file, reviewer="rita",
                 scope="project", member=["usr_owner"])

    procedure = Procedure.objects.get(name="release")
    assert procedure.scope == "project" and [s.external_id for s in procedure.members.all()] == ["usr_owner"]


@pytest.mark.parametrize("options, message", [
    ({"tenant": "nope"}, "No tenant"),
    ({"reviewer": "nobody"}, "No user"),
    ({"reviewer": "pat"}, "not_a_reviewer"),
    ({"file": "/does/not/exist"}, "Cannot read"),
    ({"name": "Bad Name"}, "procedure name"),
    ({"member": ["usr_ghost"]}, "Unknown subject"),
])
def test_it_refuses_with_a_clear_error_and_writes_nothing(tenant, reviewer, body_file, options, message):
    user_create(tenant=tenant, username="pat", password="pw")
    args = {"tenant": "acme", "name": "refunds", "file": body_file, "reviewer": "rita", **options}

    with pytest.raises(CommandError, match=message):
        call_command("publish_procedure", **args)
    assert not ProcedureVersion.objects.exists() and not Procedure.objects.exists()


def test_the_admin_shows_a_procedures_members(tenant, reviewer, agent, body_file, admin_client):
    call_command("publish_procedure", tenant="acme", name="release", file=body_file, reviewer="rita",
                 scope="project", member=["usr_owner"])
    procedure = Procedure.objects.get(name="release")

    page = admin_client.get(f"/admin/procedures/procedure/{procedure.pk}/change/").content.decode()

    assert "Members" in page and "usr_owner" in page
