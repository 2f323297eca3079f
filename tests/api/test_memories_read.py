"""GET /api/v1/memories, /memories/{id}, /memories/{id}/history: the principal's own records only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.conftest import memory_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def seat(agent):
    return agent.post("/api/v1/memories", memory_body()).json()


def test_it_lists_the_principals_records(agent, seat):
    response = agent.get("/api/v1/memories")

    assert response.status_code == 200
    assert [r["memory_id"] for r in response.json()["results"]] == [seat["memory_id"]]


def test_it_filters_by_namespace_prefix_kind_and_status(agent, seat):
    agent.post("/api/v1/memories", memory_body(namespace=["user", "profile"], kind="profile",
                                               fact={"field": "home", "value": "MUC"}, source={"event_id": "e2"}))

    assert len(agent.get("/api/v1/memories", {"namespace": "user"}).json()["results"]) == 2
    assert len(agent.get("/api/v1/memories", {"namespace": "user/profile"}).json()["results"]) == 1
    assert len(agent.get("/api/v1/memories", {"kind": "preference"}).json()["results"]) == 1
    assert len(agent.get("/api/v1/memories", {"status": "superseded"}).json()["results"]) == 0


def test_it_rejects_a_bad_filter(agent):
    response = agent.get("/api/v1/memories", {"status": "everything"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_it_paginates(agent):
    for i in range(3):
        agent.post("/api/v1/memories", memory_body(fact={"field": f"f{i}", "value": "v"}, source={"event_id": f"e{i}"}))

    first = agent.get("/api/v1/memories", {"limit": 2}).json()
    second = agent.get("/api/v1/memories", {"limit": 2, "offset": first["next_offset"]}).json()

    assert len(first["results"]) == 2 and first["next_offset"] == 2
    assert len(second["results"]) == 1 and second["next_offset"] is None


def test_another_subject_sees_nothing_and_gets_404(outsider, seat):
    assert outsider.get("/api/v1/memories").json()["results"] == []
    assert outsider.get(f"/api/v1/memories/{seat['memory_id']}").status_code == 404
    assert outsider.get(f"/api/v1/memories/{seat['memory_id']}/history").status_code == 404


def test_another_tenant_with_the_same_subject_id_sees_nothing(foreign_agent, seat):
    assert foreign_agent.get("/api/v1/memories").json()["results"] == []
    response = foreign_agent.get(f"/api/v1/memories/{seat['memory_id']}")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_it_returns_one_record(agent, seat):
    response = agent.get(f"/api/v1/memories/{seat['memory_id']}")

    assert response.status_code == 200
    expected = {k: v for k, v in seat.items() if k != "policy"}
    assert response.json() == expected


def test_it_returns_the_supersession_chain_oldest_first(agent, seat):
    newer = agent.post("/api/v1/memories", memory_body(fact={"field": "seat_preference", "value": "window"},
                                                       text="Prefers window seats", source={"event_id": "e2"})).json()

    history = agent.get(f"/api/v1/memories/{seat['memory_id']}/history").json()["history"]

    assert [h["memory_id"] for h in history] == [seat["memory_id"], newer["memory_id"]]
    assert history[0]["status"] == "superseded" and history[0]["superseded_by"] == newer["memory_id"]
    assert history[1]["supersedes"] == seat["memory_id"]


def test_reads_need_credentials(seat):
    client = APIClient()
    assert client.get("/api/v1/memories").status_code == 401
    assert client.get(f"/api/v1/memories/{seat['memory_id']}").status_code == 401
    assert client.get(f"/api/v1/memories/{seat['memory_id']}/history").status_code == 401
