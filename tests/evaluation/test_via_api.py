"""`manage.py evaluate --via-api URL`: the same scenarios driven over real HTTP against a running server.

The server is pytest-django's live_server (a real threaded WSGI server on a socket) with a real
``manage.py qcluster`` worker on the same test database: consolidation, embeddings and the deletion
fan-out run there, asynchronously, and the runner waits for them as a client must. Keys are made as
an operator would: a tenant + an agent key with mint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command


@pytest.mark.worker
def test_it_drives_a_running_server_and_its_worker_over_http(live_server: Any, qcluster: Any, tmp_path: Path) -> None:
    from memory.identity.services import agent_key_create, tenant_create
    from memory.models import Subject

    keys = []
    for slug in ("ops-a", "ops-b"):
        tenant = tenant_create(slug=slug)
        keys.append(agent_key_create(tenant=tenant, name="eval", permissions=["read", "write", "propose", "mint"])[1])
    out = tmp_path / "report.json"
    call_command("evaluate", "--via-api", live_server.url, "--api-key", keys[0], "--api-key-b", keys[1],
                 "--scenario", "travel_preference_drift", "--scenario", "deletion_everywhere",
                 "--json", str(out), "--no-fail")
    report = json.loads(out.read_text())
    assert report["mode"] == f"via-api {live_server.url}"
    assert {name: m["failures"][:2] for name, m in report["metrics"].items() if not m["ok"]} == {}
    assert report["metrics"]["isolation"]["value"] == 1.0
    assert any("another tenant" in c for c in report["metrics"]["isolation"]["extra"]["cases"])
    statuses = {name: c["status"] for name, c in report["adversarial"].items()}
    assert statuses == {"injected_instructions": "pass", "body_scope_change": "pass", "secret_in_evidence": "pass",
                        "poisoned_procedure": "skipped", "deletion_races_consolidation": "skipped"}
    # Cleanup went through DELETE /subject: the run's subjects hold nothing any more.
    leftover = Subject.objects.filter(external_id__startswith=report["run_id"], records__isnull=False)
    assert not leftover.exists()
