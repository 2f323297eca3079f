"""A failing surface is retried with backoff; a job whose run fails waits for its automatic retries (still
pending for the person), and a job that cannot finish after them stays visibly failed with the reason."""

from __future__ import annotations

import pytest

from memory.deletion import registry
from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord
from tests.conftest import memory_body
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_retries(settings):
    """Jobs end failed at the first failed run (the automatic retries are the subject of their own tests)."""
    settings.ENGRAM_DELETION_JOB_RETRIES = 0


@pytest.fixture
def surface():
    """Register a real purge surface for the test (and remove it afterwards)."""
    names = []

    def register(name, fn, order=60):
        registry.purge_surface(name, order=order)(fn)
        names.append(name)

    yield register
    for name in names:
        registry._surfaces.pop(name, None)


def test_a_step_that_keeps_failing_ends_the_job_failed_with_the_reason(agent, surface, no_retries):
    calls = []

    def broken(target):
        calls.append(target.memory_ids)
        raise RuntimeError("search cluster unreachable")

    surface("external_index", broken)
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]

    assert run_job(job_id) == "failed"

    status = agent.get(f"/api/v1/deletions/{job_id}").json()
    assert status["status"] == "failed"
    assert "external_index" in status["reason"] and "search cluster unreachable" in status["reason"]
    steps = {s["name"]: s for s in status["steps"]}
    assert steps["external_index"]["status"] == "failed" and steps["external_index"]["attempts"] == 3
    assert "RuntimeError: search cluster unreachable" in steps["external_index"]["last_error"]
    assert len(calls) == 3
    assert steps["verification"]["status"] == "pending"  # never "done" after a failed step
    # Content-bearing surfaces after the failing one were not reached yet: the retry can find them.
    assert MemoryRecord.objects.get(pk=memory_id).text == "Prefers aisle seats"


def test_a_step_that_recovers_on_retry_lets_the_job_complete(agent, surface):
    attempts = []

    def flaky(target):
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("timeout")
        return 1

    surface("flaky_cache", flaky)
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]

    assert run_job(job_id) == "completed"

    steps = {s["name"]: s for s in agent.get(f"/api/v1/deletions/{job_id}").json()["steps"]}
    assert steps["flaky_cache"] == {"name": "flaky_cache", "status": "done", "attempts": 3, "rows": 1,
                                    "last_error": ""}


def test_asking_again_resumes_a_failed_job_at_the_failed_step(agent, surface, no_retries):
    state = {"broken": True}
    done_before = []

    def sometimes(target):
        if state["broken"]:
            raise RuntimeError("down")
        return 0

    surface("external_index", sometimes)
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    assert run_job(job_id) == "failed"
    job = DeletionJob.objects.get(pk=job_id)
    done_before = [s.name for s in job.steps.filter(status="done")]

    state["broken"] = False
    again = agent.delete(f"/api/v1/memories/{memory_id}")

    assert again.json()["deletion_id"] == job_id and again.json()["status"] == "pending"
    assert run_job(job_id) == "completed"
    job.refresh_from_db()
    assert job.runs == 2 and job.reason == ""
    # Steps already done were not run twice.
    assert all(job.steps.get(name=n).attempts == 1 for n in done_before)


def test_verification_fails_the_job_when_a_read_surface_still_shows_the_content(agent, no_retries):
    def leaky(target):
        return ["cache copy"]  # a read surface that still answers with the content

    registry.read_check("leaky_surface")(leaky)
    try:
        memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
        job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
        assert run_job(job_id) == "failed"
    finally:
        registry._read_checks.pop("leaky_surface")

    job = DeletionJob.objects.get(pk=job_id)
    assert "verification" in job.reason and "leaky_surface: cache copy" in job.reason
    assert job.steps.get(name="verification").attempts == 3


def test_the_error_text_never_keeps_the_content(agent, surface, no_retries):
    def quoting(target):
        raise ValueError(f"row rejected: {target.markers}")

    surface("quoting", quoting)
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    run_job(job_id)

    job = DeletionJob.objects.get(pk=job_id)
    assert "aisle" not in job.reason and "[redacted]" in job.reason


def test_a_failed_run_waits_for_its_automatic_retry_and_the_person_sees_it_under_way(agent, surface, settings):
    from datetime import timedelta

    from django.utils import timezone

    from memory.deletion.tasks import sweep_deletions

    settings.ENGRAM_DELETION_JOB_RETRIES = 2
    state = {"broken": True}

    def sometimes(target):
        if state["broken"]:
            raise RuntimeError("down")
        return 0

    surface("external_index", sometimes)
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]

    assert run_job(job_id) == "pending"

    job = DeletionJob.objects.get(pk=job_id)
    assert job.retries == 1 and job.retry_at is not None and "external_index" in job.reason
    status = agent.get(f"/api/v1/deletions/{job_id}").json()
    assert status["status"] == "pending" and status["reason"] == ""
    assert sweep_deletions() == 0  # not due yet

    DeletionJob.objects.filter(pk=job_id).update(retry_at=timezone.now() - timedelta(seconds=1))
    assert sweep_deletions() == 1
    assert run_job(job_id) == "pending"  # still broken: the second retry is further away
    job.refresh_from_db()
    assert job.retries == 2 and job.retry_at > timezone.now() + timedelta(seconds=50)

    assert run_job(job_id) == "failed"  # the retries are spent
    job.refresh_from_db()
    assert job.retry_at is None
    assert agent.get(f"/api/v1/deletions/{job_id}").json()["status"] == "failed"

    state["broken"] = False
    assert run_job(job_id) == "failed"  # a failed job is not run again by a stray delivery ...


def test_an_operator_retries_failed_jobs_with_deletion_retry(agent, surface, no_retries):
    from io import StringIO

    from django.core.management import call_command

    from memory.models import AuditEntry

    state = {"broken": True}

    def sometimes(target):
        if state["broken"]:
            raise RuntimeError("down")
        return 0

    surface("external_index", sometimes)
    ids = [agent.post("/api/v1/memories", memory_body(
        fact={"field": f"f{n}", "value": f"v{n}"}, text=f"Prefers option {n}",
        source={"type": "explicit_user_statement", "event_id": f"evt_{n}", "text": f"option {n}"})).json()["memory_id"]
        for n in range(2)]
    jobs = [agent.delete(f"/api/v1/memories/{m}").json()["deletion_id"] for m in ids]
    assert [run_job(j) for j in jobs] == ["failed", "failed"]
    state["broken"] = False

    out = StringIO()
    call_command("deletion_retry", jobs[0], stdout=out)
    assert f"{jobs[0]}: pending" in out.getvalue()
    assert run_job(jobs[0]) == "completed"

    call_command("deletion_retry", "--all-failed", stdout=out)
    assert run_job(jobs[1]) == "completed"
    assert AuditEntry.objects.filter(action="deletion.retried", object_id__in=jobs).count() == 2


def test_a_run_takes_the_subjects_waiting_single_record_jobs_along(agent, outsider):
    from tests.deletion.helpers import tables_containing

    ids = [agent.post("/api/v1/memories", memory_body(
        fact={"field": f"f{n}", "value": f"batchvalue{n}x"}, text=f"Prefers batchmarker{n}x",
        source={"type": "explicit_user_statement", "event_id": f"evt_b{n}", "text": f"said batchsaid{n}x"}))
        .json()["memory_id"] for n in range(3)]
    other = outsider.post("/api/v1/memories", memory_body()).json()["memory_id"]
    jobs = [agent.delete(f"/api/v1/memories/{m}").json()["deletion_id"] for m in ids]
    elsewhere = outsider.delete(f"/api/v1/memories/{other}").json()["deletion_id"]

    assert run_job(jobs[1]) == "completed"

    statuses = dict(DeletionJob.objects.values_list("pk", "status"))
    assert [statuses[j] for j in jobs] == ["completed"] * 3
    assert statuses[elsewhere] == "pending"  # another subject's job is not taken along
    for job_id in jobs:
        body = agent.get(f"/api/v1/deletions/{job_id}").json()
        assert all(s["status"] == "done" for s in body["steps"]), body
    assert run_job(jobs[0]) == "completed"  # its own delivery finds it done
    for n in range(3):
        assert tables_containing(f"batchmarker{n}x") == [] and tables_containing(f"batchsaid{n}x") == []
