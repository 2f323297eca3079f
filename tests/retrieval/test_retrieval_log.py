"""GET /api/v1/retrievals/{id}: the log of one retrieve call, for the same principal only; deletion purges it."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory.deletion.registry import DeletionTarget, read_checks, surfaces
from memory.models import MemoryClass, MemoryRecord
from memory.retrieval.models import RetrievalLog
from memory.retrieval.services import DEFAULT_LOG_RETENTION
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged(agent, remember):
    memory_id = remember(agent, "Prefers aisle seats", field="seat_preference", value="aisle")
    remember(agent, "Lives in Lisbon", field="home_city", value="Lisbon")
    return memory_id, retrieve(agent, "aisle seats")["retrieval_id"]


def test_it_returns_the_log_to_the_same_principal(agent, logged):
    memory_id, retrieval_id = logged

    body = agent.get(f"/api/v1/retrievals/{retrieval_id}").json()

    assert body["retrieval_id"] == retrieval_id
    assert body["request"]["budget_tokens"] == 400 and body["request"]["include"] == ["memory"]
    assert any(c["memory_id"] == memory_id and c["selected"] for c in body["candidates"])
    assert body["expires_at"] > body["created_at"]


def test_it_is_404_for_another_subject_another_tenant_or_an_unknown_id(agent, outsider, foreign_agent, logged):
    _, retrieval_id = logged

    for other in (outsider, foreign_agent):
        response = other.get(f"/api/v1/retrievals/{retrieval_id}")
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
    assert agent.get("/api/v1/retrievals/ret_nope").status_code == 404


def test_it_requires_credentials(client, logged):
    assert client.get(f"/api/v1/retrievals/{logged[1]}").status_code == 401


def _lifetime(retrieval_id):
    log = RetrievalLog.objects.get(pk=retrieval_id)
    return log.expires_at - log.created_at


def test_it_expires_with_the_shortest_retention_of_the_classes_it_mentions(agent, tenant, remember):
    remember(agent, "Flew to Lisbon in May", namespace=["episodes"], kind="episode", field="trip", value="Lisbon")
    remember(agent, "Works on the payments team", namespace=["project"], field="team", value="payments")
    MemoryClass.objects.filter(tenant=tenant, name="episodes").update(default_ttl=dt.timedelta(days=3))

    quoting_episode = retrieve(agent, "Lisbon trip")["retrieval_id"]
    project_only = retrieve(agent, "payments team", namespaces=[["project"]])["retrieval_id"]

    assert dt.timedelta(days=3) - dt.timedelta(minutes=1) < _lifetime(quoting_episode) <= dt.timedelta(days=3)
    # A class without a retention of its own: the default (30 days) bounds the log.
    assert abs(_lifetime(project_only) - DEFAULT_LOG_RETENTION) < dt.timedelta(minutes=1)


def test_a_quoted_superseded_record_bounds_the_logs_retention_too(agent, tenant, remember):
    remember(agent, "Flew to Lisbon in May", namespace=["episodes"], kind="episode", field="trip", value="Lisbon")
    porto = remember(agent, "Flew to Porto in May", namespace=["episodes"], kind="episode", field="trip",
                     value="Porto")
    MemoryRecord.objects.filter(pk=porto).update(status="deleted", text="")  # no live episode is a candidate
    MemoryClass.objects.filter(tenant=tenant, name="episodes").update(default_ttl=dt.timedelta(days=2))
    remember(agent, "Prefers Lisbon hotels near the river", namespace=["project"], field="hotel", value="river")

    body = retrieve(agent, "Lisbon trip in May")

    shown = agent.get(f"/api/v1/retrievals/{body['retrieval_id']}").json()
    assert [c["text"] for c in shown["candidates"] if c["reason"] == "superseded"] == ["Flew to Lisbon in May"]
    assert _lifetime(body["retrieval_id"]) <= dt.timedelta(days=2)


def test_purge_expired_deletes_logs_past_their_retention_only(agent, logged):
    _, old = logged
    fresh = retrieve(agent, "Lisbon")["retrieval_id"]
    RetrievalLog.objects.filter(pk=old).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    out = StringIO()
    call_command("purge_expired", stdout=out)

    assert "1 expired retrieval log(s)" in out.getvalue()
    assert list(RetrievalLog.objects.values_list("pk", flat=True)) == [fresh]


def test_a_log_keeps_no_copy_of_a_records_text(agent, logged):
    memory_id, retrieval_id = logged

    log = RetrievalLog.objects.get(pk=retrieval_id)

    assert any(c.get("memory_id") == memory_id for c in log.candidates)
    assert all("text" not in c for c in log.candidates if c.get("memory_id"))
    shown = agent.get(f"/api/v1/retrievals/{retrieval_id}").json()["candidates"]
    assert {c["memory_id"]: c["text"] for c in shown}[memory_id] == "Prefers aisle seats"


def test_a_deleted_record_reads_deleted_in_the_logs_and_is_never_written_into_a_new_one(agent, logged):
    memory_id, retrieval_id = logged
    assert agent.delete(f"/api/v1/memories/{memory_id}").status_code == 202

    shown = agent.get(f"/api/v1/retrievals/{retrieval_id}").json()["candidates"]
    entry = next(c for c in shown if c.get("memory_id") == memory_id)
    assert entry["deleted"] is True and "text" not in entry

    body = retrieve(agent, "aisle seats")
    assert body["dropped"].get("deleted") == 1
    assert all(c.get("memory_id") != memory_id for c in RetrievalLog.objects.get(pk=body["retrieval_id"]).candidates)


def test_deletion_blanks_a_query_quoting_a_deleted_record_with_one_indexed_statement(agent, logged):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    memory_id, retrieval_id = logged
    quoting = retrieve(agent, "does the user prefer aisle seats on trains?")["retrieval_id"]
    target = DeletionTarget(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk,
                            subject_external_id="usr_owner", memory_ids=(memory_id,), markers=("Prefers aisle seats",
                                                                                              "aisle seats"))
    check = read_checks()["retrieval_logs"]
    assert sorted(check(target)) == sorted([f"retrieval log {retrieval_id}", f"retrieval log {quoting}"])

    purge = next(s for s in surfaces() if s.name == "retrieval_logs").purge
    with CaptureQueriesContext(connection) as queries:
        assert purge(target) == 2
    assert len([q for q in queries.captured_queries if "retrieval_retrievallog" in q["sql"]]) == 1
    assert purge(target) == 0  # idempotent
    assert check(target) == []

    log = RetrievalLog.objects.get(pk=quoting)
    assert log.query == "" and any(c.get("memory_id") == memory_id for c in log.candidates)


def test_subject_erasure_deletes_the_subjects_logs_only(agent, outsider, logged, remember):
    remember(outsider, "Prefers aisle seats", field="seat_preference", value="aisle")
    retrieve(outsider, "aisle")
    target = DeletionTarget(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk,
                            subject_external_id="usr_owner", whole_subject=True)

    next(s for s in surfaces() if s.name == "retrieval_logs").purge(target)

    assert not RetrievalLog.objects.filter(subject=agent.subject).exists()
    assert RetrievalLog.objects.filter(subject=outsider.subject).count() == 1
