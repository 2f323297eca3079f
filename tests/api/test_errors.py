"""Bad input gets a clear {"code", "detail"} error with the right status, never a 500, and writes nothing."""

from __future__ import annotations

import pytest

from memory.identity.services import memory_classes_load
from memory.models import Event, MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories"


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert isinstance(body["detail"], str) and body["detail"]


def test_malformed_json_is_a_400(agent):
    response = agent.client.post(URL, "{not json", content_type="application/json", **agent._headers(None))

    assert_error(response, 400, "malformed_json")


def test_an_oversized_body_is_a_400(agent, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = agent.post(URL, memory_body(text="x" * 2000))

    assert_error(response, 400, "payload_too_large")


def test_an_overlong_text_is_a_400(agent):
    assert_error(agent.post(URL, memory_body(text="x" * 5000)), 400, "invalid")


def test_unknown_fields_are_refused(agent):
    response = agent.post(URL, memory_body(confidence="confirmed"))

    assert_error(response, 400, "invalid")
    assert "confidence" in response.json()["detail"]


@pytest.mark.parametrize("namespace", [[], ["User"], ["user", "a b"], "user", [1], ["a"] * 9])
def test_a_bad_namespace_is_a_400(agent, namespace):
    response = agent.post(URL, memory_body(namespace=namespace))

    if namespace == "user":  # a string path is accepted as a convenience
        assert response.status_code == 201
    else:
        assert_error(response, 400, "invalid")


def test_a_missing_fact_is_a_400(agent):
    body = memory_body()
    del body["fact"]

    assert_error(agent.post(URL, body), 400, "invalid")


def test_a_validity_interval_that_ends_before_it_starts_is_a_400(agent):
    response = agent.post(URL, memory_body(valid_from="2026-05-01T00:00:00Z", valid_until="2026-04-01T00:00:00Z"))

    assert_error(response, 400, "invalid")


def test_a_namespace_outside_every_class_is_refused_422(agent):
    response = agent.post(URL, memory_body(namespace=["finance", "cards"]))

    assert_error(response, 422, "class_not_allowed")
    assert MemoryRecord.objects.count() == 0 and Event.objects.count() == 0


def test_a_confirmed_write_into_a_propose_only_class_is_refused_422(agent):
    response = agent.post(URL, memory_body(namespace=["user", "inferred"]))

    assert_error(response, 422, "class_not_allowed")


def test_a_class_with_no_model_permission_refuses_even_candidates(agent, tenant):
    memory_classes_load(tenant=tenant, classes=[
        {"name": "locked", "namespace_prefix": "user", "model_permission": "none"}])

    response = agent.post("/api/v1/candidates", memory_body(source={"type": "model_inferred"}))

    assert_error(response, 422, "class_not_allowed")


def test_an_unknown_endpoint_is_a_json_404(agent):
    assert_error(agent.get("/api/v1/nothing-here"), 404, "not_found")


def test_a_wrong_method_is_a_json_405(agent):
    assert_error(agent.delete("/api/v1/outcomes"), 405, "method_not_allowed")


def test_an_explicit_write_cannot_claim_another_authority(agent):
    response = agent.post(URL, memory_body(source={"type": "system_of_record", "event_id": "e1"}))

    assert_error(response, 400, "invalid_source_type")


@pytest.mark.parametrize("url", ["/api/v1/memories", "/api/v1/threads", "/api/v1/documents"])
def test_an_offset_beyond_the_databases_range_is_a_400_not_a_500(agent, url):
    assert_error(agent.get(url, {"offset": 2**70}), 400, "invalid")


def test_an_event_seq_beyond_the_databases_range_is_a_400_not_a_500(agent):
    thread_id = agent.post("/api/v1/threads", {"title": "t"}).json()["thread_id"]

    assert_error(agent.get(f"/api/v1/threads/{thread_id}/events", {"after": 2**70}), 400, "invalid")
