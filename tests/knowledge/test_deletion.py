"""DELETE /api/v1/documents/{id}: a deletion job that removes the document from every surface."""

from __future__ import annotations

import pytest

from memory.deletion import registry
from memory.deletion.models import DeletionJob
from memory.knowledge.models import Chunk, Document
from memory.models import AuditEntry
from memory.retrieval.models import RetrievalLog
from tests.knowledge.conftest import doc_body, search

pytestmark = pytest.mark.django_db

URL = "/api/v1/documents"
TEXT = "Warehouse Kestrel ships pallets on Tuesdays.\n\n" + "\n\n".join(
    f"Section {i}: Kestrel loading dock {i} accepts pallets from the north gate before noon." for i in range(30))


def _log_quoting(agent, document_id):
    """A retrieval log of another subject that quotes the document (as the pipeline writes them)."""
    from django.utils import timezone

    chunk = Chunk.objects.filter(document_id=document_id).first()
    return RetrievalLog.objects.create(
        tenant=agent.tenant, subject=agent.subject, actor="test", query="kestrel pallets",
        candidates=[{"source": "knowledge", "id": f"doc:{document_id}:chunk:{chunk.pk}", "text": chunk.text},
                    {"source": "memory", "id": "mem_x", "text": "unrelated"}],
        expires_at=timezone.now() + timezone.timedelta(days=1))


def test_it_removes_the_document_from_every_surface(agent, make_agent, make_domain, tenant):
    make_domain(tenant, "logistics", subjects=("usr_owner", "usr_colleague"))
    colleague = make_agent(tenant, "usr_colleague")
    document_id = agent.post(URL, doc_body(access_domain="logistics", external_id="kestrel", title="Kestrel",
                                           text=TEXT)).json()["document_id"]
    keep_id = agent.post(URL, doc_body(access_domain="logistics", external_id="other", title="Other")).json()[
        "document_id"]
    assert Chunk.objects.filter(document_id=document_id).count() > 1
    assert search(colleague, "Kestrel pallets")
    log = _log_quoting(colleague, document_id)

    response = agent.delete(f"{URL}/{document_id}")

    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["deletion_id"].startswith("del_")
    assert body["status"] == "completed"
    steps = {s["name"]: s for s in body["steps"]}
    assert set(steps) == {"knowledge_retrieval_logs", "knowledge_chunks", "knowledge_document", "verification"}
    assert all(s["status"] == "done" for s in steps.values())
    assert steps["knowledge_chunks"]["rows"] > 1 and steps["knowledge_retrieval_logs"]["rows"] == 1
    # Rows: document and chunks (text, embedding and full-text vector are chunk columns) are gone.
    assert not Document.objects.filter(pk=document_id).exists()
    assert not Chunk.objects.filter(document_id=document_id).exists()
    assert Document.objects.filter(pk=keep_id).exists()
    # Both retrieval legs, for every reader.
    assert [i for i in search(colleague, "Kestrel pallets north gate") if i.packet["document_id"] == document_id] == []
    # The API.
    assert agent.get(f"{URL}/{document_id}").status_code == 404
    assert document_id not in [d["document_id"] for d in agent.get(URL).json()["results"]]
    # Retrieval logs of other subjects no longer quote it; the rest of the log stays.
    log.refresh_from_db()
    assert [e["id"] for e in log.candidates] == ["mem_x"]
    assert "Kestrel" not in str(log.candidates)
    # Every registered read check agrees.
    target = registry.DeletionTarget(tenant_id=tenant.pk, subject_id=agent.subject.pk,
                                     subject_external_id="usr_owner", document_ids=(document_id,))
    assert {name: check(target) for name, check in registry.read_checks().items()
            if name.startswith("knowledge_")} == {"knowledge_rows": [], "knowledge_retrieval_logs": []}
    job = DeletionJob.objects.get(pk=body["deletion_id"])
    assert job.kind == "document" and job.plan["document_ids"] == [document_id]
    assert AuditEntry.objects.filter(action="document.delete", object_id=str(document_id)).exists()


def test_the_job_status_is_readable_at_its_status_url_by_the_deleter_only(agent, make_agent, tenant, handbook):
    document_id = agent.post(URL, doc_body()).json()["document_id"]
    deleted = agent.delete(f"{URL}/{document_id}").json()
    colleague = make_agent(tenant, "usr_colleague")

    status = agent.get(deleted["status_url"])

    assert status.status_code == 200, status.json()
    body = status.json()
    assert body["deletion_id"] == deleted["deletion_id"]
    assert body["kind"] == "document" and body["status"] == "completed"
    assert {s["name"] for s in body["steps"]} >= {"knowledge_chunks", "knowledge_document", "verification"}
    assert colleague.get(deleted["status_url"]).status_code == 404


def test_deleting_again_returns_the_same_job(agent, handbook):
    document_id = agent.post(URL, doc_body()).json()["document_id"]
    first = agent.delete(f"{URL}/{document_id}").json()

    again = agent.delete(f"{URL}/{document_id}")

    assert again.status_code == 202
    assert again.json()["deletion_id"] == first["deletion_id"]
    assert DeletionJob.objects.count() == 1


def test_it_needs_the_write_scope_and_a_readable_domain(make_agent, tenant, agent, outsider, foreign_agent,
                                                        client, handbook):
    document_id = agent.post(URL, doc_body()).json()["document_id"]
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    assert client.delete(f"{URL}/{document_id}").status_code == 401
    assert reader.delete(f"{URL}/{document_id}").status_code == 403
    assert outsider.delete(f"{URL}/{document_id}").status_code == 404
    assert foreign_agent.delete(f"{URL}/{document_id}").status_code == 404
    assert Document.objects.filter(pk=document_id).exists()


def test_knowledge_surfaces_leave_memory_targets_alone(agent, handbook):
    agent.post(URL, doc_body())
    target = registry.DeletionTarget(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk,
                                     subject_external_id="usr_owner", memory_ids=("mem_1",), markers=("refund",),
                                     whole_subject=True)

    rows = [s.purge(target) for s in registry.surfaces() if s.name.startswith("knowledge_")]

    assert rows == [0, 0, 0]
    assert Document.objects.count() == 1 and Chunk.objects.count() == 1


def test_a_deletion_that_cannot_finish_is_the_runners_to_retry_and_deleting_again_resumes_it(agent, handbook,
                                                                                              settings, monkeypatch):
    """A document's job runs through the shared deletion runner: a surface that keeps failing is retried per step,
    the job waits for the runner's next try (409 to the caller, the status URL says pending), and asking again
    resumes it where it stopped."""
    settings.ENGRAM_DELETION_RETRY_BASE_SECONDS, settings.ENGRAM_DELETION_STEP_ATTEMPTS = 0, 3
    document_id = agent.post(URL, doc_body()).json()["document_id"]
    failing = {"on": True}

    def flaky(target):
        if target.document_ids and failing["on"]:
            raise RuntimeError("the surface is unavailable")
        return 0

    # A knowledge surface after the document row's, registered as any area registers one.
    monkeypatch.setitem(registry._surfaces, "knowledge_flaky", registry.Surface("knowledge_flaky", 50, flaky))

    first = agent.delete(f"{URL}/{document_id}")

    assert first.status_code == 409 and first.json()["code"] == "deletion_incomplete"
    job = DeletionJob.objects.get(kind="document")
    assert job.status == "pending" and job.retry_at is not None
    steps = {s.name: s for s in job.steps.all()}
    assert steps["knowledge_flaky"].status == "failed" and steps["knowledge_flaky"].attempts == 3
    assert steps["knowledge_document"].status == "done" and not Document.objects.filter(pk=document_id).exists()
    assert agent.get(f"/api/v1/deletions/{job.pk}").json()["status"] == "pending"

    failing["on"] = False
    again = agent.delete(f"{URL}/{document_id}")

    assert again.status_code == 202, again.json()
    assert again.json()["deletion_id"] == job.pk and again.json()["status"] == "completed"
    assert {s["name"]: s["status"] for s in again.json()["steps"]} == {
        "knowledge_retrieval_logs": "done", "knowledge_chunks": "done", "knowledge_document": "done",
        "knowledge_flaky": "done", "verification": "done"}
    assert DeletionJob.objects.count() == 1
