"""POST /api/v1/memories/batch: each item validated, policy-checked and idempotent exactly like a single write."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import OrmQ

from memory.models import AuditEntry, Event, MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories/batch"


def item(n, **overrides):
    body = {"fact": {"field": f"pref_{n}", "value": f"value {n}"}, "text": f"Preference number {n}",
            "source": {"type": "explicit_user_statement", "event_id": f"evt_b{n}"}}
    return memory_body(**{**body, **overrides})


def test_it_writes_every_valid_item_and_reports_each(agent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post(URL, {"items": [item(n) for n in range(5)]})

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["created"], body["existing"], body["error"]) == (5, 0, 0)
    assert [r["index"] for r in body["results"]] == list(range(5))
    assert all(r["status"] == "created" and r["http_status"] == 201 for r in body["results"])
    first = body["results"][0]["record"]
    assert first["fact"] == {"field": "pref_0", "value": "value 0"} and first["confidence"] == "confirmed"
    assert first["source"] == {"type": "explicit_user_statement", "event_id": "evt_b0"}
    assert MemoryRecord.objects.filter(search_vector="preference").count() == 5  # lexically searchable now
    assert AuditEntry.objects.filter(action="memory.write").count() == 5
    assert OrmQ.objects.count() == 1  # one embedding task for the whole batch


def test_it_refuses_bad_items_one_by_one_and_writes_the_rest(agent):
    items = [
        item(0),
        item(1, namespace=["nowhere"]),  # no memory class
        item(2, text="my password is hunter2hunter2"),  # a secret
        item(3, fact={"field": "BAD FIELD", "value": 1}),  # validation
        item(4, subject_id="usr_someone_else"),  # scope mismatch
        item(5, namespace=["user", "inferred"]),  # propose-only class
        item(6, source={"type": "model_inferred", "event_id": "evt_b6"}),  # not a write path here
    ]

    body = agent.post(URL, {"items": items}).json()

    results = {r["index"]: r for r in body["results"]}
    assert results[0]["status"] == "created"
    assert (results[1]["http_status"], results[1]["code"]) == (422, "class_not_allowed")
    assert (results[2]["http_status"], results[2]["code"]) == (422, "secret_detected")
    assert "hunter2" not in results[2]["detail"]
    assert (results[3]["http_status"], results[3]["code"]) == (400, "invalid")
    assert (results[4]["http_status"], results[4]["code"]) == (400, "scope_mismatch")
    assert (results[5]["http_status"], results[5]["code"]) == (422, "class_not_allowed")
    assert (results[6]["http_status"], results[6]["code"]) == (400, "invalid_source_type")
    assert MemoryRecord.objects.count() == 1
    assert not Event.objects.filter(text__contains="hunter2").exists()


def test_it_is_idempotent_per_event_id_across_batches_and_single_writes(agent):
    single = agent.post("/api/v1/memories", item(0)).json()["memory_id"]
    first = agent.post(URL, {"items": [item(0), item(1)]}).json()
    again = agent.post(URL, {"items": [item(0), item(1), item(1)]}).json()

    assert first["results"][0]["status"] == "existing" and first["results"][0]["memory_id"] == single
    assert [r["status"] for r in again["results"]] == ["existing", "existing", "existing"]
    assert again["results"][1]["memory_id"] == again["results"][2]["memory_id"] == first["results"][1]["memory_id"]
    assert MemoryRecord.objects.count() == 2


def test_it_refuses_a_reused_event_id_with_other_content(agent):
    agent.post(URL, {"items": [item(0)]})
    changed = item(0, text="Something else entirely")

    body = agent.post(URL, {"items": [changed, item(1), {**item(1), "text": "different"}]}).json()

    assert body["results"][0]["code"] == "idempotency_conflict" and body["results"][0]["http_status"] == 409
    assert body["results"][1]["status"] == "created"
    assert body["results"][2]["code"] == "idempotency_conflict"


def test_it_applies_precedence_in_order_within_a_batch_and_against_stored_heads(agent):
    stored = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]  # aisle, explicit
    seat = {"namespace": ["user", "travel_preferences"], "kind": "preference"}
    items = [
        {**seat, "fact": {"field": "seat_preference", "value": "window"}, "text": "Prefers window seats",
         "source": {"type": "explicit_user_statement", "event_id": "evt_w"}},
        {**seat, "fact": {"field": "seat_preference", "value": "middle"}, "text": "Middle seat from an outcome",
         "source": {"type": "verified_outcome", "event_id": "evt_m"}},
        {**seat, "fact": {"field": "seat_preference", "value": "aisle"}, "text": "Prefers aisle seats again",
         "source": {"type": "explicit_user_statement", "event_id": "evt_a"}},
    ]

    results = agent.post(URL, {"items": items}).json()["results"]

    assert [r["policy"]["outcome"] for r in results] == ["supersede", "keep_inactive", "supersede"]
    window, middle, aisle = (r["memory_id"] for r in results)
    assert MemoryRecord.objects.get(pk=stored).superseded_by_id == window
    assert MemoryRecord.objects.get(pk=window).status == "superseded"
    assert MemoryRecord.objects.get(pk=window).superseded_by_id == aisle
    assert MemoryRecord.objects.get(pk=middle).status == "superseded"
    live = MemoryRecord.objects.filter(field="seat_preference", status="active")
    assert list(live.values_list("pk", flat=True)) == [aisle]
    assert agent.get("/api/v1/facts", {"namespace": "user/travel_preferences",
                                       "field": "seat_preference"}).json()["memory_id"] == aisle


def test_it_accepts_outcomes_with_a_reference(agent):
    outcome = {"namespace": ["project"], "kind": "order", "field": "order_status",
               "reference": {"system": "erp", "id": "SO-991"},
               "source": {"type": "system_of_record", "event_id": "evt_so"}}

    result = agent.post(URL, {"items": [outcome]}).json()["results"][0]

    assert result["status"] == "created", result
    assert result["record"]["fact"]["reference"] == {"system": "erp", "id": "SO-991"}
    assert AuditEntry.objects.filter(action="outcome.record", object_id=result["memory_id"]).exists()


def test_it_writes_500_items_in_as_many_queries_as_5(agent, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        assert agent.post(URL, {"items": [item(n) for n in range(5)]}).json()["created"] == 5
    with django_assert_max_num_queries(len(few)):
        body = agent.post(URL, {"items": [item(n) for n in range(5, 505)]}).json()

    assert (body["created"], body["error"]) == (500, 0)
    assert MemoryRecord.objects.count() == 505
    assert AuditEntry.objects.filter(action="memory.write").count() == 505


def test_it_refuses_more_than_500_items(agent):
    response = agent.post(URL, {"items": [item(n) for n in range(501)]})

    assert response.status_code == 400
    assert response.json()["code"] == "batch_too_large"
    assert MemoryRecord.objects.count() == 0


def test_it_needs_the_write_scope(make_agent, tenant):
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    response = reader.post(URL, {"items": [item(0)]})

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_it_writes_only_for_the_tokens_subject(agent, outsider):
    agent.post(URL, {"items": [item(0)]})

    assert outsider.get("/api/v1/memories").json()["results"] == []


def test_it_requires_credentials(client):
    assert client.post(URL, {"items": [item(0)]}, content_type="application/json").status_code == 401


def test_it_can_compute_the_embeddings_in_the_call(agent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        body = agent.post(URL, {"items": [item(n) for n in range(3)], "embed": "now"}).json()

    assert body["created"] == 3
    assert not MemoryRecord.objects.filter(embedding__isnull=True).exists()
    assert not OrmQ.objects.exists()  # nothing left for the worker


def test_a_stored_embedding_is_the_models_vector_to_the_last_bit(agent):
    import numpy as np

    from memory.retrieval.embedding import write_embeddings

    agent.post(URL, {"items": [item(n) for n in range(3)]})  # their embedding task never runs here
    ids = list(MemoryRecord.objects.order_by("pk").values_list("pk", flat=True))
    # Random float32 values need nine significant digits to survive a text form; the binary form keeps each one.
    vectors = np.random.default_rng(7).standard_normal((3, 384)).astype(np.float32)

    with CaptureQueriesContext(connection) as captured:
        assert write_embeddings(list(zip(ids, vectors, strict=True))) == 3
    assert [q["sql"].split()[0] for q in captured] == ["UPDATE"]  # one statement, logged like Django's own

    # Read back on the same connection, through the ORM's own vector field.
    stored = {r.pk: r.embedding for r in MemoryRecord.objects.filter(pk__in=ids)}
    assert all(np.array_equal(np.asarray(stored[i], dtype=np.float32), v) for i, v in zip(ids, vectors, strict=True))
    assert write_embeddings(list(zip(ids, vectors, strict=True))) == 0  # only rows still without one


def test_a_replayed_batch_cannot_recreate_a_deleted_record(agent, sync_tasks, django_capture_on_commit_callbacks):
    first = agent.post(URL, {"items": [item(0), item(1)]}).json()["results"]
    doomed = first[0]["memory_id"]
    with django_capture_on_commit_callbacks(execute=True):  # the deletion job runs (synchronously)
        assert agent.delete(f"/api/v1/memories/{doomed}").status_code == 202
    assert MemoryRecord.objects.get(pk=doomed).status == "deleted"

    again = agent.post(URL, {"items": [item(0), item(1), item(2)]}).json()["results"]

    assert (again[0]["http_status"], again[0]["code"]) == (409, "tombstoned")
    assert [r["status"] for r in again[1:]] == ["existing", "created"]
    assert not MemoryRecord.objects.filter(text="Preference number 0", status="active").exists()


def test_the_pending_sweep_embeds_what_was_left_behind_and_leaves_fresh_records_to_their_task(agent):
    from datetime import timedelta

    from django.utils import timezone

    from memory.records.tasks import embed_pending

    agent.post(URL, {"items": [item(n) for n in range(4)]})  # their embedding task never runs here
    left_behind = list(MemoryRecord.objects.order_by("pk").values_list("pk", flat=True)[:2])
    MemoryRecord.objects.filter(pk__in=left_behind).update(created_at=timezone.now() - timedelta(hours=1))

    assert embed_pending() == 2
    embedded = set(MemoryRecord.objects.filter(embedding__isnull=False).values_list("pk", flat=True))
    assert embedded == set(left_behind)
