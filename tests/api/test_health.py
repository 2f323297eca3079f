"""GET /api/v1/health: no credentials needed; reports the database and whether a worker is alive."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.conftest import wait_for


@pytest.mark.django_db
def test_it_reports_ok_database_and_a_down_worker_without_credentials():
    response = APIClient().get("/api/v1/health")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert body["worker"] == "down"
    assert body["embeddings_pending"] == 0


@pytest.mark.worker
def test_it_reports_the_worker_ok_while_a_qcluster_runs(qcluster):
    body = wait_for(lambda: (b := APIClient().get("/api/v1/health").json())["worker"] == "ok" and b, timeout=30)

    assert body["database"] == "ok"
