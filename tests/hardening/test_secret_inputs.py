"""Secrets are refused wherever a client's words would be kept: retrieve queries and filters (kept in the
retrieval log, shown in exports), subject ids when minting, workflow ids and other identifiers in paths,
idempotency keys. Refused with 422 secret_detected and stored nowhere."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.models import Subject
from memory.policy import secrets as policy
from memory.retrieval.models import RetrievalLog
from memory.threads.models import Checkpoint
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def assert_refused(response, where: str):
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["code"] == "secret_detected" and where in body["detail"]
    assert GITHUB_TOKEN not in body["detail"] and AWS_KEY not in body["detail"]


def test_a_retrieve_query_holding_a_secret_is_refused_and_not_logged(agent):
    response = agent.post("/api/v1/retrieve", {"query": f"my token is {GITHUB_TOKEN}"})

    assert_refused(response, "query")
    assert RetrievalLog.objects.count() == 0


def test_a_retrieve_filter_holding_a_secret_is_refused(agent):
    response = agent.post("/api/v1/retrieve", {"query": "seats", "filters": {"fields": [AWS_KEY]}})

    assert_refused(response, "filters.fields[0]")
    assert RetrievalLog.objects.count() == 0


def test_a_clean_query_is_still_answered_and_logged(agent):
    assert agent.post("/api/v1/retrieve", {"query": "which seat do I like"}).status_code == 200
    assert RetrievalLog.objects.count() == 1


def test_a_secret_used_as_a_subject_id_is_not_minted(make_agent, tenant):
    minter = make_agent(tenant, subject=None, scopes=["mint"])

    response = minter.post("/api/v1/principal-tokens", {"subject_id": GITHUB_TOKEN})

    assert_refused(response, "subject_id")
    assert not Subject.objects.filter(external_id=GITHUB_TOKEN).exists()


def test_a_secret_used_as_a_workflow_id_is_refused(agent):
    response = agent.put(f"/api/v1/workflows/{GITHUB_TOKEN}/checkpoint", {"current_step": "s1"})

    assert_refused(response, "workflow_id")
    assert Checkpoint.objects.count() == 0


def test_a_secret_in_an_idempotency_key_header_is_refused(agent):
    thread = agent.post("/api/v1/threads", {"title": "t"}).json()

    response = agent.post(f"/api/v1/threads/{thread['thread_id']}/events", {"kind": "message", "text": "hi"},
                          headers={"Idempotency-Key": AWS_KEY})

    assert_refused(response, "Idempotency-Key")


# The scan skips detect-secrets for lines none of its enabled plugins could flag; it must never change an answer.
texts = st.one_of(st.text(max_size=80), st.sampled_from([GITHUB_TOKEN, AWS_KEY, "password = hunter22!",
                                                          "api_key: 'abcdefghijklmnop1234'", "xoxb-1234-5678-abcdef"]))


@settings(max_examples=200, deadline=None)
@given(prefix=st.text(max_size=20), text=texts, suffix=st.text(max_size=20))
def test_the_prefilter_never_changes_what_the_scan_finds(prefix, text, suffix):
    line = prefix + text + suffix
    filtered = policy.scan_text(line)
    saved = policy._PREFILTER
    policy._PREFILTER = []  # an empty prefilter runs every plugin on every line
    try:
        unfiltered = policy.scan_text(line)
    finally:
        policy._PREFILTER = saved
    assert filtered == unfiltered


# Namespaces and kinds are lowercase names: these tokens fit that form.
SLACK_TOKEN = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
STRIPE_KEY = "sk_live_" + "a1b2c3d4e5f6g7h8i9j0k1l2"


@pytest.mark.parametrize("field, value, where", [
    ("namespaces", [["user", SLACK_TOKEN]], "namespaces[0]"),
    ("kinds", [STRIPE_KEY], "kinds[0]"),
])
def test_a_retrieve_namespace_or_kind_holding_a_secret_is_refused_and_not_logged(agent, field, value, where):
    response = agent.post("/api/v1/retrieve", {"query": "seats", field: value})

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "secret_detected" and where in response.json()["detail"]
    assert SLACK_TOKEN not in response.content.decode() and STRIPE_KEY not in response.content.decode()
    assert RetrievalLog.objects.count() == 0


@pytest.mark.parametrize("method, url, body", [
    ("post", "/api/v1/retrieve", {"query": "seats", "types": [GITHUB_TOKEN]}),
    ("post", "/api/v1/retrieve", {"query": "seats", "include": [AWS_KEY]}),
    ("post", "/api/v1/memories", {**memory_body(), GITHUB_TOKEN: "x"}),
    ("post", "/api/v1/memories", memory_body(type=GITHUB_TOKEN)),
    ("get", f"/api/v1/memories?status={GITHUB_TOKEN}", None),
    ("get", f"/api/v1/threads/thr_x/events?status={AWS_KEY}", None),
])
def test_a_rejected_value_is_never_echoed(agent, method, url, body):
    response = getattr(agent, method)(url, body) if body is not None else agent.get(url)

    assert 400 <= response.status_code < 500, response.content
    text = response.content.decode()
    assert GITHUB_TOKEN not in text and AWS_KEY not in text


def test_a_short_rejected_value_is_not_echoed_either(agent):
    response = agent.post("/api/v1/retrieve", {"query": "seats", "types": ["zq7"]})

    assert response.status_code == 400
    assert "zq7" not in response.content.decode() and "types" in response.json()["detail"]


def test_a_batch_items_error_does_not_echo_its_value(agent):
    response = agent.post("/api/v1/memories/batch", {"items": [memory_body(type=GITHUB_TOKEN)]})

    assert response.status_code == 200
    assert response.json()["results"][0]["code"] == "invalid"
    assert GITHUB_TOKEN not in response.content.decode()


def test_an_error_naming_a_secret_the_client_sent_does_not_repeat_it(agent):
    response = agent.get(f"/api/v1/facts?namespace=user&field={SLACK_TOKEN}")

    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert SLACK_TOKEN not in response.content.decode() and "[REDACTED]" in response.json()["detail"]


# Made at 2026-12-04 17:40:54 UTC: its time characters spell "A3T" and sixteen capitals and digits follow, the shape
# of an AWS access key id.
ID_OF_THE_AWS_SHAPE = "prp_01M912A3T43WRQVTVZ6HNNE2MD"


def test_an_id_the_service_made_is_never_taken_for_a_secret(agent):
    assert policy.scan_text(ID_OF_THE_AWS_SHAPE) == []

    response = agent.delete(f"/api/v1/procedures/refunds/proposals/{ID_OF_THE_AWS_SHAPE}")
    retrieved = agent.post("/api/v1/retrieve", {"query": f"what happened to {ID_OF_THE_AWS_SHAPE}"})

    assert response.json()["code"] != "secret_detected"
    assert retrieved.status_code == 200, retrieved.json()


def test_a_real_key_beside_an_id_is_still_found():
    assert policy.scan_text(f"{ID_OF_THE_AWS_SHAPE} AKIAIOSFODNN7EXAMPLE") == ["aws_access_key"]
    # The same characters without the id's shape (a letter it cannot hold) are scanned as they are.
    assert policy.scan_text("prp_01M912A3T43WRQVTVZ6HNNE2MU") == ["aws_access_key"]
