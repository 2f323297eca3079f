"""A failing surface is retried with backoff; a job that cannot finish stays visibly failed with the reason."""

from __future__ import annotations

import pytest

from memory.deletion import registry
from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord
from tests.conftest import memory_body
from tests.deletion.helpers import run_job

pytestmark = pytest.mark.django_db


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


def test_a_step_that_keeps_failing_ends_the_job_failed_with_the_reason(agent, surface):
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


def test_asking_again_resumes_a_failed_job_at_the_failed_step(agent, surface):
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


def test_verification_fails_the_job_when_a_read_surface_still_shows_the_content(agent):
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


def test_the_error_text_never_keeps_the_content(agent, surface):
    def quoting(target):
        raise ValueError(f"row rejected: {target.markers}")

    surface("quoting", quoting)
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    run_job(job_id)

    job = DeletionJob.objects.get(pk=job_id)
    assert "aisle" not in job.reason and "[redacted]" in job.reason
