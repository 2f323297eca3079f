"""GET /api/v1/procedures, /procedures/{name}, /versions, /versions/{n}: agents read approved versions."""

from __future__ import annotations

import pytest

from memory.identity.access import reviewer_of
from procedures.services import procedure_publish
from tests.procedures.conftest import BODY_V1

pytestmark = pytest.mark.django_db


def test_it_serves_the_current_approved_version_with_number_and_approver(agent, procedure):
    response = agent.get("/api/v1/procedures/refunds")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["name"] == "refunds" and body["version"] == 1 and body["status"] == "approved"
    assert body["approved_by"] == "rita" and body["approved_at"]
    assert body["body"] == BODY_V1
    assert body["scope"] == "org"


def test_it_lists_names_and_current_versions(agent, tenant, reviewer, procedure):
    procedure_publish(tenant=tenant, name="refunds", body=BODY_V1 + "4. Say thanks.\n", reviewer=reviewer_of(reviewer))
    procedure_publish(tenant=tenant, name="onboarding", body="Welcome the user.", reviewer=reviewer_of(reviewer))

    results = agent.get("/api/v1/procedures").json()["results"]

    assert [(r["name"], r["version"]) for r in results] == [("onboarding", 1), ("refunds", 2)]
    assert "body" not in results[0]


def test_it_serves_an_earlier_version_and_the_version_list(agent, tenant, reviewer, procedure):
    procedure_publish(tenant=tenant, name="refunds", body="Version two.", reviewer=reviewer_of(reviewer))

    assert agent.get("/api/v1/procedures/refunds/versions/1").json()["body"] == BODY_V1
    assert agent.get("/api/v1/procedures/refunds").json()["body"] == "Version two."
    versions = agent.get("/api/v1/procedures/refunds/versions").json()["results"]
    assert [v["version"] for v in versions] == [1, 2]


def test_it_answers_404_for_an_unknown_procedure_or_version(agent, procedure):
    assert agent.get("/api/v1/procedures/nope").json()["code"] == "not_found"
    assert agent.get("/api/v1/procedures/nope").status_code == 404
    assert agent.get("/api/v1/procedures/refunds/versions/9").status_code == 404
    assert agent.get("/api/v1/procedures/refunds/versions/x").status_code == 404


def test_version_zero_is_no_version_not_the_current_one(agent, procedure):
    response = agent.get("/api/v1/procedures/refunds/versions/0")

    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_it_hides_another_tenants_procedures(foreign_agent, procedure):
    assert foreign_agent.get("/api/v1/procedures/refunds").status_code == 404
    assert foreign_agent.get("/api/v1/procedures/refunds/versions/1").status_code == 404
    assert foreign_agent.get("/api/v1/procedures/refunds/versions").status_code == 404
    assert foreign_agent.get("/api/v1/procedures").json()["results"] == []


def test_it_shows_a_project_procedure_only_to_its_members(agent, outsider, tenant, reviewer):
    procedure_publish(tenant=tenant, name="release", body="Tag, build, ship.", reviewer=reviewer_of(reviewer),
                      scope="project", members=["usr_owner"])

    assert agent.get("/api/v1/procedures/release").status_code == 200
    assert outsider.get("/api/v1/procedures/release").status_code == 404
    assert outsider.get("/api/v1/procedures").json()["results"] == []


@pytest.mark.parametrize("path", ["/api/v1/procedures", "/api/v1/procedures/refunds",
                                  "/api/v1/procedures/refunds/versions", "/api/v1/procedures/refunds/versions/1"])
def test_it_requires_a_key_and_a_principal(client, make_agent, tenant, procedure, path):
    assert client.get(path).status_code == 401
    keyonly = make_agent(tenant, subject=None)
    response = keyonly.get(path)
    assert response.status_code == 401 and response.json()["code"] == "principal_required"


def test_it_refuses_a_key_without_the_read_scope(make_agent, tenant, procedure):
    writer = make_agent(tenant, "usr_owner", scopes=["propose"])

    response = writer.get("/api/v1/procedures/refunds")

    assert response.status_code == 403 and response.json()["code"] == "insufficient_scope"
