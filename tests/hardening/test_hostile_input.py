"""Input no column can store — NUL, lone surrogates, 64-bit overflows, runaway nesting — is a 400 that names
the offending value, on every surface, before anything is written; a batch answers a bad item alone."""

from __future__ import annotations

import json

import pytest

from memory.models import Event, MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

NUL, SURROGATE = "\x00", "\ud800"


def post_raw(agent, path: str, body, method: str = "post"):
    """Send ``body`` exactly as a hostile client would: lone surrogates as \\ud800 escapes, which is valid JSON."""
    raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=True).encode()
    return agent.client.generic(method.upper(), path, raw, content_type="application/json", **agent._headers(None))


def assert_invalid(response, names: str, code: str = "invalid"):
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == code
    assert names in body["detail"], body["detail"]


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
@pytest.mark.parametrize("where, body, names", [
    ("fact value", memory_body(fact={"field": "seat_preference", "value": "ai{bad}sle"}), "fact.value"),
    ("nested fact value", memory_body(fact={"field": "seat_preference", "value": {"a": [1, "x{bad}"]}}),
     "fact.value.a[1]"),
    ("fact value key", memory_body(fact={"field": "seat_preference", "value": {"k{bad}": 1}}), "fact.value.k"),
    ("unknown field name", {**memory_body(), "zz{bad}": 1}, "zz"),
])
def test_a_json_value_that_cannot_be_stored_is_a_400_naming_it(agent, bad, where, body, names):
    body = json.loads(json.dumps(body).replace("{bad}", json.dumps(bad)[1:-1]))

    response = post_raw(agent, "/api/v1/memories", body)

    assert_invalid(response, names)
    assert Event.objects.count() == 0 and MemoryRecord.objects.count() == 0


def test_a_lone_surrogate_in_an_unknown_field_of_retrieve_is_a_400(agent):
    response = post_raw(agent, "/api/v1/retrieve", b'{"query": "x", "zz\\ud800": 1}')

    assert_invalid(response, "zz\\ud800")


@pytest.mark.parametrize("path, method, body, names", [
    ("/api/v1/threads", "post", {"title": "t", "metadata": {"a": "\x00"}}, "metadata.a"),
    ("/api/v1/workflows/wf_1/checkpoint", "put", {"artifacts": {"x": ["\x00"]}}, "artifacts.x[0]"),
    ("/api/v1/workflows/wf_1/tool-calls", "post", {"idempotency_key": "k1", "tool": "t", "arguments": {"\x00": 1}},
     "arguments.\\u0000"),
    ("/api/v1/retrieve", "post", {"query": "aisle", "filters": {"fields": ["\x00"]}}, "filters.fields[0]"),
    ("/api/v1/candidates", "post", memory_body(namespace=["user", "inferred"], evidence=[{"text": "\x00"}]),
     "evidence[0].text"),
])
def test_every_json_typed_field_refuses_nul(agent, path, method, body, names):
    assert_invalid(post_raw(agent, path, body, method), names)


def test_an_integer_beyond_64_bits_in_a_body_is_a_400(agent):
    response = post_raw(agent, "/api/v1/memories", memory_body(fact={"field": "seat_preference", "value": 2**64}))

    assert_invalid(response, "fact.value")


def test_a_number_that_overflows_to_infinity_is_a_400(agent):
    raw = json.dumps(memory_body()).replace('"aisle"', "1e400").encode()

    assert_invalid(post_raw(agent, "/api/v1/memories", raw), "fact.value")


@pytest.mark.parametrize("path", ["/api/v1/memories", "/api/v1/threads", "/api/v1/documents"])
def test_an_offset_beyond_any_row_count_is_a_400(agent, path):
    response = agent.get(path, {"offset": str(2**63)})

    assert_invalid(response, "offset")


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_deep_nesting_is_a_400_too_deep(agent, depth):
    raw = b'{"query": "x", "filters": {"a": ' + b"[" * depth + b"]" * depth + b"}}"

    assert_invalid(post_raw(agent, "/api/v1/retrieve", raw), "nested", code="too_deep")


def test_nesting_within_the_limit_is_accepted(agent):
    value: object = "aisle"
    for _ in range(20):
        value = {"v": value}

    response = post_raw(agent, "/api/v1/memories", memory_body(fact={"field": "seat_preference", "value": value}))

    assert response.status_code == 201, response.content


@pytest.mark.parametrize("path", ["/api/v1/memories/mem_%00x", "/api/v1/memories/mem_%00x/history",
                                  "/api/v1/threads/thr_%00/events", "/api/v1/deletions/del_%00",
                                  "/api/v1/procedures/a%00b", "/api/v1/workflows/w%00/checkpoint"])
def test_a_nul_in_a_path_id_is_a_400_before_any_query(agent, path, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = agent.get(path)

    assert_invalid(response, "path parameter")


def test_a_nul_in_a_query_parameter_is_a_400(agent):
    assert_invalid(agent.get("/api/v1/facts", {"namespace": "user/x", "field": "a\x00"}), "query parameter field")


def test_a_nul_in_a_ui_path_is_a_plain_400(client):
    assert client.get("/me/memories/mem_%00x/").status_code == 400


def test_a_memory_batch_answers_a_bad_item_alone(agent):
    good = memory_body(source={"type": "explicit_user_statement", "event_id": "evt_ok"})
    bad = memory_body(fact={"field": "seat_preference", "value": {"k": "\x00"}},
                      source={"type": "explicit_user_statement", "event_id": "evt_bad"})
    key_bad = {**memory_body(source={"type": "explicit_user_statement", "event_id": "evt_bad2"}), "z\ud800": 1}

    response = post_raw(agent, "/api/v1/memories/batch", {"items": [good, bad, key_bad]})

    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "error", "error"]
    assert results[1]["code"] == "invalid" and "fact.value.k" in results[1]["detail"]
    assert "z\\ud800" in results[2]["detail"]
    assert MemoryRecord.objects.count() == 1


def test_a_document_batch_answers_a_bad_item_alone(make_agent, tenant):
    from memory.knowledge.services import access_domain_create

    access_domain_create(tenant=tenant, name="handbook", subject_external_ids=["usr_owner"])
    agent = make_agent(tenant, "usr_owner")
    docs = [{"access_domain": "handbook", "external_id": "ok", "title": "Hours", "text": "The office opens at nine."},
            {"access_domain": "handbook", "external_id": "bad", "text": "x", "metadata": {"a": "\x00"}}]

    response = post_raw(agent, "/api/v1/documents/batch", {"documents": docs})

    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "error"]
    assert "metadata.a" in results[1]["detail"]
