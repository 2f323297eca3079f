"""The deletion job end to end through a real `manage.py qcluster` worker process."""

from __future__ import annotations

import pytest

from memory.deletion.models import DeletionJob
from tests.conftest import memory_body, wait_for
from tests.deletion.helpers import tables_containing

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_real_worker_runs_the_job_to_completed(agent, qcluster):
    memory_id = agent.post("/api/v1/memories", memory_body(
        text="Prefers workermarker551 seats", source={"type": "explicit_user_statement", "event_id": "evt_w"})
    ).json()["memory_id"]

    response = agent.delete(f"/api/v1/memories/{memory_id}")
    assert response.status_code == 202

    job_id = response.json()["deletion_id"]
    status = wait_for(lambda: DeletionJob.objects.filter(pk=job_id, status__in=["completed", "failed"]).first(),
                      timeout=90)
    assert status.status == "completed", status.reason
    body = agent.get(response.json()["status_url"]).json()
    assert body["status"] == "completed" and all(s["status"] == "done" for s in body["steps"])
    assert tables_containing("workermarker551") == []
