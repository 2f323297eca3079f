"""A subject's centroid (memory/retrieval/centroid.py): a record close to everything the subject says no longer
outranks the one that answers; the worker keeps the centroid with the vectors it writes; deletion computes it again
without the deleted records, and an erasure removes it. Real model, real database, through the API."""

from __future__ import annotations

import numpy as np
import pytest

from memory.models import MemoryRecord
from memory.retrieval import candidates
from memory.retrieval.models import RecordContext, SubjectCentroid
from memory.retrieval.tasks import sweep_subject_indexes
from tests.conftest import memory_body
from tests.deletion.helpers import run_job
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db

# Seven records about the people and things around her, which all read alike ("Her ..."), and what she does.
AROUND = ["Her mother is a retired teacher", "Her favourite season is autumn", "Her flat is on the fourth floor",
          "Her best friend lives next door", "Her phone is always on silent", "Her car is a blue estate",
          "Her birthday falls in June"]
SHE_DOES = ["Keeps two rabbits in the garden", "Repairs bicycles at a shop in town", "Studies Japanese on the bus",
            "Bakes sourdough every Saturday", "Swims in the lake all summer"]


def _cosine(a: object, b: object) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_a_record_close_to_everything_the_subject_says_no_longer_outranks_the_answer(agent, remember, monkeypatch):
    ids = {text: remember(agent, text) for text in [*AROUND, *SHE_DOES]}
    answer = ids["Studies Japanese on the bus"]

    first = retrieve(agent, "Which language is she learning?")["packets"][0]

    assert first["memory_id"] == answer, first
    # The cause: with plain cosines "Her mother is a retired teacher", as close to the question as to every "her"
    # record of the subject, came first.
    monkeypatch.setattr(candidates, "GENERIC", 0.0)
    plain = retrieve(agent, "Which language is she learning?")["packets"][0]
    assert plain["memory_id"] == ids["Her mother is a retired teacher"], plain


def test_the_worker_keeps_the_centroid_with_the_vectors_it_writes(agent, remember):
    written = [remember(agent, text) for text in AROUND]

    centroid = SubjectCentroid.objects.get(subject_id=agent.subject.pk)
    assert centroid.records == len(written) and centroid.windows == 0
    vectors = np.array([r.embedding for r in MemoryRecord.objects.filter(pk__in=written)], dtype=np.float64)
    mean = vectors.mean(axis=0)
    assert _cosine(centroid.direction, mean) > 0.9999
    total = vectors.sum(axis=0)
    assert centroid.total == pytest.approx(float(np.linalg.norm(total)), abs=1e-4)
    # Each record's closeness to the others: its cosine with the sum of the other records' vectors.
    assert centroid.record_similarity == pytest.approx(np.mean([_cosine(v, total - v) for v in vectors]), abs=1e-4)

    remember(agent, "Swims in the lake all summer")  # a small subject's centroid follows every new record

    assert SubjectCentroid.objects.get(subject_id=agent.subject.pk).records == len(written) + 1


def test_deleting_a_record_computes_the_centroid_again_without_it(agent, remember):
    kept = remember(agent, "Keeps two rabbits in the garden")
    deleted = remember(agent, "Repairs bicycles at a shop in town")
    assert SubjectCentroid.objects.get(subject_id=agent.subject.pk).records == 2

    job = agent.delete(f"/api/v1/memories/{deleted}").json()["deletion_id"]

    assert run_job(job) == "completed"
    steps = {s["name"]: s["status"] for s in agent.get(f"/api/v1/deletions/{job}").json()["steps"]}
    assert steps["subject_centroid"] == "done"
    centroid = SubjectCentroid.objects.get(subject_id=agent.subject.pk)
    assert centroid.records == 1
    # One record left: the centroid is its vector, and nothing of the deleted one.
    assert _cosine(centroid.direction, MemoryRecord.objects.get(pk=kept).embedding) > 0.9999


def test_erasing_the_subject_removes_its_centroid(agent, outsider, remember):
    remember(agent, "Keeps two rabbits in the garden")
    remember(outsider, "Bakes sourdough every Saturday")

    job = agent.delete("/api/v1/subject").json()["deletion_id"]

    assert run_job(job) == "completed"
    assert not SubjectCentroid.objects.filter(subject_id=agent.subject.pk).exists()
    assert SubjectCentroid.objects.filter(subject_id=outsider.subject.pk).exists()


def test_the_schedule_computes_the_centroid_of_a_subject_that_has_none(agent, remember):
    for text in SHE_DOES:
        remember(agent, text)
    SubjectCentroid.objects.all().delete()  # written before centroids existed

    sweep_subject_indexes()

    assert SubjectCentroid.objects.get(subject_id=agent.subject.pk).records == len(SHE_DOES)


def test_a_batch_embedded_in_the_request_moves_the_centroid_with_it(agent):
    items = [memory_body(fact={"field": f"fact_{n}", "value": text}, text=text,
                         source={"type": "explicit_user_statement", "event_id": f"evt_now_{n}"})
             for n, text in enumerate(SHE_DOES)]

    response = agent.post("/api/v1/memories/batch", {"items": items, "embed": "now"})

    assert response.status_code == 200, response.json()
    assert SubjectCentroid.objects.get(subject_id=agent.subject.pk).records == len(SHE_DOES)


def test_an_imported_conversation_has_the_centroid_of_all_its_turns_once_derived(agent, sync_tasks,
                                                                                django_capture_on_commit_callbacks):
    # 240 turns in batches of 60, each derived by the worker's task: once nothing of the subject is pending, its
    # centroid counts every turn and every window.
    turns = [{"namespace": ["user", "conversation"], "kind": "conversation_turn", "type": "episodic",
              "fact": {"field": f"turn_{n}", "value": f"Turn {n}: {SHE_DOES[n % len(SHE_DOES)]}"},
              "text": f"{'Lea' if n % 2 else 'Sam'}: {SHE_DOES[n % len(SHE_DOES)]} ({n})",
              "source": {"type": "explicit_user_statement", "event_id": f"evt_turn_{n}",
                         "occurred_at": f"2026-05-02T18:{n // 60:02d}:00Z"}} for n in range(240)]
    for start in range(0, len(turns), 60):
        with django_capture_on_commit_callbacks(execute=True):
            response = agent.post("/api/v1/memories/batch", {"items": turns[start:start + 60]})
        assert response.status_code == 200, response.json()

    centroid = SubjectCentroid.objects.get(subject_id=agent.subject.pk)
    assert centroid.records == 240
    assert centroid.windows == RecordContext.objects.filter(subject_id=agent.subject.pk,
                                                            embedding__isnull=False).count() == 240
    assert agent.get("/api/v1/health").json()["derived_pending"] == 0
