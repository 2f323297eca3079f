"""GET /metrics: every family with its type, numbers that move with the events they count, access from this
host or with the token only, and no tenant's data in any label. (Across real web and worker processes:
tests/hardening/test_observability.py.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django_q.conf import Conf
from prometheus_client.parser import text_string_to_metric_families

from api.models import ThrottleCounter
from api.throttling import AgentKeyThrottle, AnonymousThrottle
from memory.deletion import registry
from memory.deletion.services import deletion_run
from memory.embedder import MiniLMEmbedder
from memory.embedder_guard import EmbedderUnavailable, GuardedEmbedder
from memory.identity.services import subject_get_or_create
from memory.queues import BULK, enqueue
from memory.retrieval.models import SubjectIndex
from memory.workqueues import metrics_dir
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

FAMILIES = {
    "engram_http_request_duration_seconds": "histogram",
    "engram_retrieve_stage_seconds": "histogram",
    "engram_queue_tasks": "gauge",
    "engram_derived_pending": "gauge",
    "engram_subject_index_places": "gauge",
    "engram_deletion_jobs_total": "counter",
    "engram_deletion_duration_seconds": "histogram",
    "engram_records_written_total": "counter",
    "engram_throttled_requests_total": "counter",
    "engram_embedder_degraded": "gauge",
    "engram_deadlock_retries_total": "counter",
    "engram_task_duration_seconds": "histogram",
}


def scrape(client: Any, **extra: Any) -> str:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


def value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels`` (0 when there is none)."""
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.fixture
def sync_tasks(monkeypatch: Any) -> None:
    monkeypatch.setattr(Conf, "SYNC", True)


def test_it_serves_every_family_with_its_type_to_this_host(client):
    text = scrape(client)

    for name, kind in FAMILIES.items():
        assert f"# TYPE {name} {kind}\n" in text, name
    assert value(text, "engram_embedder_degraded") == 0
    assert {s.labels["queue"] for f in text_string_to_metric_families(text) if f.name == "engram_queue_tasks"
            for s in f.samples} == {"urgent", "engram", "bulk"}


def test_the_places_for_large_subjects_indexes_are_read_from_the_database(client, settings, tenant):
    settings.ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS = 7
    subject = subject_get_or_create(tenant=tenant, external_id="usr_large")
    SubjectIndex.objects.create(subject_id=subject.pk, tenant=tenant)

    text = scrape(client)

    assert value(text, "engram_subject_index_places", state="taken") == 1
    assert value(text, "engram_subject_index_places", state="capacity") == 7


def test_a_request_is_counted_under_its_url_pattern_not_its_path(client, agent):
    route = "api/v1/memories/<str:memory_id>"
    before = value(scrape(client), "engram_http_request_duration_seconds_count", route=route, method="GET",
                   status="404")

    assert agent.get("/api/v1/memories/mem_zq7notthere").status_code == 404

    text = scrape(client)
    assert value(text, "engram_http_request_duration_seconds_count", route=route, method="GET",
                 status="404") == before + 1
    assert "mem_zq7notthere" not in text


def test_writes_are_counted_by_path_once_committed(client, agent, django_capture_on_commit_callbacks):
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        written = agent.post("/api/v1/memories", memory_body())
        assert written.status_code == 201
        assert agent.post("/api/v1/outcomes", {
            "namespace": ["user", "bookings"], "kind": "booking", "fact": {"field": "last_booking", "value": "B1"},
            "source": {"type": "verified_outcome", "event_id": "evt_booking_1"}}).status_code == 201
        assert agent.post(f"/api/v1/memories/{written.json()['memory_id']}/correct",
                          {"fact": {"value": "window"}}).status_code == 201
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.post("/api/v1/memories", memory_body()).status_code == 200  # a replay writes nothing

    after = scrape(client)
    for path in ("statement", "outcome", "correction"):
        assert value(after, "engram_records_written_total", path=path) == value(
            before, "engram_records_written_total", path=path) + 1, path
    assert value(after, "engram_records_written_total", path="candidate") == value(
        before, "engram_records_written_total", path="candidate")


def test_each_retrieve_stage_is_timed(client, agent):
    before = scrape(client)

    assert agent.post("/api/v1/retrieve", {"query": "aisle seats"}).status_code == 200

    after = scrape(client)
    for stage in ("embed", "memory", "sources", "budget", "log"):
        assert value(after, "engram_retrieve_stage_seconds_count", stage=stage) == value(
            before, "engram_retrieve_stage_seconds_count", stage=stage) + 1, stage


def test_queued_tasks_and_pending_embeddings_are_read_from_the_database(client, agent,
                                                                        django_capture_on_commit_callbacks):
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=False):  # the write's embedding task is not queued
        assert agent.post("/api/v1/memories", memory_body()).status_code == 201
    enqueue("memory.records.tasks.embed_pending", queue=BULK)

    after = scrape(client)
    assert value(after, "engram_derived_pending", kind="embeddings") == value(
        before, "engram_derived_pending", kind="embeddings") + 1
    assert value(after, "engram_queue_tasks", queue=BULK, state="queued") == value(
        before, "engram_queue_tasks", queue=BULK, state="queued") + 1


def test_a_deletion_and_its_task_are_counted(client, agent, sync_tasks, django_capture_on_commit_callbacks):
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    before = scrape(client)

    with django_capture_on_commit_callbacks(execute=True):  # the job runs (synchronously) on commit
        assert agent.delete(f"/api/v1/memories/{memory_id}").status_code == 202

    after = scrape(client)
    assert value(after, "engram_deletion_jobs_total", status="completed") == value(
        before, "engram_deletion_jobs_total", status="completed") + 1
    assert value(after, "engram_deletion_duration_seconds_count") == value(
        before, "engram_deletion_duration_seconds_count") + 1
    task = {"queue": "urgent", "task": "memory.deletion.tasks.run_deletion", "result": "succeeded"}
    assert value(after, "engram_task_duration_seconds_count", **task) == value(
        before, "engram_task_duration_seconds_count", **task) + 1


def test_a_deletion_that_fails_is_counted_as_failed(client, agent, settings):
    settings.ENGRAM_DELETION_RETRY_BASE_SECONDS = 0.01
    settings.ENGRAM_DELETION_JOB_RETRIES = 0  # fail now, not after the automatic retries

    def unreachable(target: Any) -> None:
        raise RuntimeError("search cluster unreachable")

    registry.purge_surface("zq_external_index", order=60)(unreachable)
    try:
        memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
        job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
        before = scrape(client)

        assert deletion_run(job_id=job_id) == "failed"
    finally:
        registry._surfaces.pop("zq_external_index", None)

    after = scrape(client)
    assert value(after, "engram_deletion_jobs_total", status="failed") == value(
        before, "engram_deletion_jobs_total", status="failed") + 1
    assert value(after, "engram_deletion_duration_seconds_count") == value(
        before, "engram_deletion_duration_seconds_count")  # only completed deletions are timed


def test_a_throttled_request_is_counted(client, agent, monkeypatch):
    rates = {"agent_key": "2/min", "anonymous": "600/min"}
    monkeypatch.setattr(AgentKeyThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(AnonymousThrottle, "THROTTLE_RATES", rates)
    ThrottleCounter.objects.all().delete()
    before = value(scrape(client), "engram_throttled_requests_total", limit="agent_key")

    assert [agent.get("/api/v1/memories").status_code for _ in range(3)] == [200, 200, 429]

    assert value(scrape(client), "engram_throttled_requests_total", limit="agent_key") == before + 1


def test_the_embedder_gauge_is_up_while_the_model_fails(client, settings, tmp_path, monkeypatch):
    monkeypatch.setenv("ENGRAM_EMBEDDER", "onnx")  # no fallback to PyTorch
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(tmp_path))  # and no model's export there
    settings.ENGRAM_EMBEDDER_RETRY_SECONDS = 0
    embedder = GuardedEmbedder(MiniLMEmbedder())
    with pytest.raises(EmbedderUnavailable):
        embedder.embed_query("aisle seats")

    assert value(scrape(client), "engram_embedder_degraded") == 1

    monkeypatch.undo()  # the installed model again
    assert len(embedder.embed_query("aisle seats")) == embedder.dimensions
    assert value(scrape(client), "engram_embedder_degraded") == 0


# --- who may scrape ---------------------------------------------------------------------------------


def test_another_host_is_refused_without_a_configured_token(client, settings):
    settings.ENGRAM_METRICS_TOKEN = ""

    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden" and response.json()["detail"]


def test_another_host_needs_the_token(client, settings):
    settings.ENGRAM_METRICS_TOKEN = "mtk_" + "s3cret" * 4

    missing = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    wrong = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer mtk_wrong")
    right = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION=f"Bearer {settings.ENGRAM_METRICS_TOKEN}")

    assert missing.status_code == 401 and missing.json()["code"] == "not_authenticated"
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert right.status_code == 200 and "# TYPE engram_queue_tasks gauge" in right.content.decode()


def test_a_request_forwarded_by_a_proxy_on_this_host_is_not_local(client, settings):
    settings.ENGRAM_METRICS_TOKEN = ""

    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")

    assert response.status_code == 403


# --- no tenant data ---------------------------------------------------------------------------------


def test_no_label_carries_a_tenant_subject_namespace_or_id(client, make_tenant, make_agent, sync_tasks,
                                                            django_capture_on_commit_callbacks, monkeypatch):
    tenant = make_tenant("zqtenantslug")
    agent = make_agent(tenant, "usr_zqsubjectmark")
    with django_capture_on_commit_callbacks(execute=True):
        written = agent.post("/api/v1/memories", memory_body(
            namespace=["user", "zqnamespacemark"], fact={"field": "zqfieldmark", "value": "zqvaluemark"},
            text="zqtextmark", source={"type": "explicit_user_statement", "event_id": "evt_zqeventmark"}))
        assert written.status_code == 201, written.json()
        memory_id = written.json()["memory_id"]
        assert agent.get(f"/api/v1/memories/{memory_id}").status_code == 200
        assert agent.post("/api/v1/retrieve", {"query": "zqtextmark", "namespaces": [["user", "zqnamespacemark"]]}
                          ).status_code == 200
        assert agent.delete(f"/api/v1/memories/{memory_id}").status_code == 202
    rates = {"agent_key": "1/min", "anonymous": "600/min"}
    monkeypatch.setattr(AgentKeyThrottle, "THROTTLE_RATES", rates)
    ThrottleCounter.objects.all().delete()
    assert [agent.get("/api/v1/memories").status_code for _ in range(2)] == [200, 429]

    text = scrape(client)

    marks = ["zqtenantslug", "zqsubjectmark", "zqnamespacemark", "zqfieldmark", "zqvaluemark", "zqtextmark",
             "zqeventmark", memory_id, agent.key]
    labels = {(k, v) for f in text_string_to_metric_families(text) for s in f.samples for k, v in s.labels.items()
              if f.name.startswith("engram_")}
    assert [m for m in marks if m in text] == []
    assert [(k, v) for k, v in labels if any(m in v for m in marks)] == []
    assert {k for k, _ in labels} <= {"route", "method", "status", "stage", "queue", "state", "kind", "path",
                                      "limit", "task", "result", "operation", "le"}
    # Route labels are URL patterns: no concrete id ever appears in them.
    assert all(not re.search(r"(mem|del|evt|usr)_[0-9A-Za-z]", v) for k, v in labels if k == "route")


def test_serve_starts_from_an_empty_metrics_directory(tmp_path, monkeypatch):
    """Values a previous run left would be added to this run's."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_4242.db").write_bytes(b"stale")
    (directory / "README").write_text("an operator's file")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))

    assert metrics_dir(8000) == directory
    assert sorted(p.name for p in directory.iterdir()) == ["README"]


def test_a_scrape_leaves_out_a_metrics_file_another_process_is_still_creating(client, tmp_path, monkeypatch):
    """A process opens its metrics file empty and sizes it next; a scrape between the two answered 500."""
    from prometheus_client.mmap_dict import MmapedDict

    from memory.metrics import MULTIPROC_ENV

    written = MmapedDict(str(tmp_path / "counter_101.db"))
    written.write_value('["engram_records_written_total", "engram_records_written_total", {"path": "batch"}, '
                        '"Records written."]', 3.0, 0.0)
    written.close()
    (tmp_path / "counter_102.db").touch()  # opened by a process starting up, not sized yet
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))

    text = scrape(client)

    assert value(text, "engram_records_written_total", path="batch") == 3
