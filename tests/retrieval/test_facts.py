"""GET /api/v1/facts: the one active record chosen by precedence; 404 none; 409 when policy cannot decide."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/facts"
SEAT = {"namespace": "user/travel_preferences", "field": "seat_preference"}


def test_it_returns_the_current_record_by_precedence(agent, remember):
    remember(agent, "Prefers window seats", namespace=["user", "travel_preferences"], field="seat_preference",
             value="window", embed=False)
    newest = remember(agent, "Prefers aisle seats", namespace=["user", "travel_preferences"],
                      field="seat_preference", value="aisle", embed=False)

    response = agent.get(URL, SEAT)

    assert response.status_code == 200, response.json()
    assert response.json()["memory_id"] == newest
    assert response.json()["fact"] == {"field": "seat_preference", "value": "aisle"}
    assert response.json()["status"] == "active"


def test_it_keeps_a_higher_authority_over_a_newer_lower_one(agent, remember):
    official = remember(agent, "Seat from the booking system: aisle", namespace=["user", "travel_preferences"],
                        field="seat_preference", value="aisle", source_type="system_of_record",
                        path="/api/v1/outcomes", embed=False)
    remember(agent, "Seat from an outcome: window", namespace=["user", "travel_preferences"],
             field="seat_preference", value="window", source_type="verified_outcome", path="/api/v1/outcomes",
             embed=False)

    assert agent.get(URL, SEAT).json()["memory_id"] == official


def test_it_answers_404_when_there_is_no_active_fact(agent, remember):
    remember(agent, "Went to Lisbon", namespace=["episodes"], field="trip", value="Lisbon", kind="episode",
             valid_from="2020-01-01T00:00:00Z", valid_until="2020-02-01T00:00:00Z", embed=False)

    for params in (SEAT, {"namespace": "episodes", "field": "trip"}):
        response = agent.get(URL, params)
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


def test_it_answers_409_listing_both_records_when_policy_cannot_decide(agent, remember):
    ids = {remember(agent, f"The office closes at {hour}", namespace=["org"], field="closing_time", value=hour,
                    source_type="org_record", kind="policy", path="/api/v1/outcomes", embed=False)
           for hour in ("18:00", "19:00")}

    response = agent.get(URL, {"namespace": "org", "field": "closing_time"})

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "conflict" and body["detail"]
    assert {r["memory_id"] for r in body["records"]} == ids


def test_it_never_answers_with_another_subjects_or_tenants_fact(agent, outsider, foreign_agent, remember):
    remember(outsider, "Prefers aisle seats", namespace=["user", "travel_preferences"], field="seat_preference",
             value="aisle", embed=False)
    remember(foreign_agent, "Prefers aisle seats", namespace=["user", "travel_preferences"],
             field="seat_preference", value="aisle", embed=False)

    assert agent.get(URL, SEAT).status_code == 404


def test_it_respects_the_tokens_namespace_grant(make_agent, tenant, agent, remember):
    remember(agent, "Prefers aisle seats", namespace=["user", "travel_preferences"], field="seat_preference",
             value="aisle", embed=False)
    narrowed = make_agent(tenant, "usr_owner", token_namespaces=["project"])

    assert narrowed.get(URL, SEAT).status_code == 404


@pytest.mark.parametrize("params", [{}, {"namespace": "user"}, {"field": "x"}, {"namespace": "Bad!", "field": "x"}])
def test_it_refuses_bad_parameters(agent, params):
    response = agent.get(URL, params)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_it_requires_credentials(client):
    assert client.get(URL, SEAT).status_code == 401
