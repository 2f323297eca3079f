"""POST /api/v1/outcomes: deterministic application outcomes are stored verbatim, never paraphrased."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from memory.models import MemoryRecord

pytestmark = pytest.mark.django_db

URL = "/api/v1/outcomes"
STATE = {"order_id": "ORD-2026-0042", "route": "MUC-LIS", "seats": ["14C"], "paid": True, "amount": 129.5}


def test_it_stores_the_verified_state_verbatim(agent):
    response = agent.post(URL, {"namespace": ["user", "bookings"], "kind": "booking",
                                "fact": {"field": "last_booking", "value": STATE},
                                "source": {"type": "verified_outcome", "event_id": "evt_booking_1"}})

    assert response.status_code == 201
    body = response.json()
    assert body["fact"] == {"field": "last_booking", "value": STATE}
    assert body["source"]["type"] == "verified_outcome"
    assert body["confidence"] == "confirmed"
    assert MemoryRecord.objects.get(pk=body["memory_id"]).fact["value"] == STATE


def test_its_default_text_is_the_verbatim_value_not_a_paraphrase(agent):
    body = agent.post(URL, {"namespace": ["user", "bookings"], "kind": "booking",
                            "fact": {"field": "seat", "value": "14C"}}).json()

    assert body["text"] == "seat: 14C"


def test_it_stores_a_reference_to_a_system_of_record(agent):
    response = agent.post(URL, {"namespace": ["user", "bookings"], "kind": "booking", "field": "last_booking",
                                "reference": {"system": "amadeus", "id": "PNR-XY12AB"},
                                "source": {"type": "system_of_record", "event_id": "evt_pnr"}})

    assert response.status_code == 201
    body = response.json()
    assert body["source"] == {"type": "system_of_record", "event_id": "evt_pnr",
                              "reference": {"system": "amadeus", "id": "PNR-XY12AB"}}
    assert body["fact"]["reference"] == {"system": "amadeus", "id": "PNR-XY12AB"}
    assert body["text"] == "last_booking: see amadeus PNR-XY12AB"


def test_it_needs_either_a_state_or_a_reference(agent):
    response = agent.post(URL, {"namespace": ["user", "bookings"], "kind": "booking"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_it_refuses_an_inferred_source(agent):
    response = agent.post(URL, {"namespace": ["user", "bookings"], "kind": "booking",
                                "fact": {"field": "seat", "value": "14C"}, "source": {"type": "model_inferred"}})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_source_type"


def test_it_is_idempotent_by_event_id(agent):
    body = {"namespace": ["user", "bookings"], "kind": "booking", "fact": {"field": "seat", "value": "14C"},
            "source": {"type": "verified_outcome", "event_id": "evt_same"}}

    first, second = agent.post(URL, body), agent.post(URL, body)

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["memory_id"] == second.json()["memory_id"]


def test_it_needs_credentials():
    assert APIClient().post(URL, {}, format="json").status_code == 401


def test_another_subject_does_not_see_the_outcome(agent, outsider, foreign_agent):
    memory_id = agent.post(URL, {"namespace": ["user", "bookings"], "kind": "booking",
                                 "fact": {"field": "seat", "value": "14C"}}).json()["memory_id"]

    assert outsider.get(f"/api/v1/memories/{memory_id}").status_code == 404
    assert foreign_agent.get(f"/api/v1/memories/{memory_id}").status_code == 404
