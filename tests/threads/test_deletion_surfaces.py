"""Deletion reaches thread state through the purge surfaces and read checks registered for it."""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from memory.deletion import registry
from memory.deletion.registry import DeletionTarget
from memory.models import MemoryRecord
from memory.threads.models import Checkpoint, Summary, Thread, ThreadEvent, ToolCall
from tests.conftest import memory_body
from tests.threads.conftest import append

pytestmark = pytest.mark.django_db
MINE = ("thread_events", "summaries", "checkpoints")


@pytest.fixture(autouse=True)
def sync_tasks(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def surface(name):
    return {s.name: s for s in registry.surfaces()}[name].purge


def purge_and_check(target):
    touched = {name: surface(name)(target) for name in MINE}
    return touched, {name: registry.read_checks()[name](target) for name in MINE}


@pytest.fixture
def cited(agent, thread_id):
    """A thread where the user states a preference, a memory record citing that event, and derived state."""
    append(agent, thread_id, "Hi, planning a trip.")
    statement = append(agent, thread_id, "I always take the aisle seat on long flights.").json()["event_id"]
    append(agent, thread_id, "Noted.", role="assistant")
    response = agent.post("/api/v1/memories", memory_body(
        source={"type": "explicit_user_statement", "event_id": statement,
                "text": "I always take the aisle seat on long flights."}))
    assert response.status_code == 201, response.json()
    record = MemoryRecord.objects.get(pk=response.json()["memory_id"])
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()["summary_id"]
    agent.put("/api/v1/workflows/wf-1/checkpoint", {
        "current_step": "book", "artifacts": {"memory": record.pk, "seat": "aisle", "flight": "TP1234"}},
        headers={"If-None-Match": "*"})
    agent.post("/api/v1/workflows/wf-1/tool-calls", {"idempotency_key": "k1", "tool": "seats.reserve",
                                                     "arguments": {"seat": "aisle", "row": 12}})
    target = DeletionTarget(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk,
                            subject_external_id="usr_owner", memory_ids=(record.pk,),
                            event_ids=(record.source_event_id,), markers=(record.text, "aisle"))
    return {"thread_id": thread_id, "statement": statement, "summary_id": summary_id, "target": target}


def test_the_threads_surfaces_and_read_checks_are_registered():
    names = {s.name for s in registry.surfaces()}

    assert set(MINE) <= names
    assert set(MINE) <= set(registry.read_checks())


def test_the_read_checks_find_what_the_deletion_must_reach(cited):
    findings = {name: registry.read_checks()[name](cited["target"]) for name in MINE}

    assert findings["thread_events"] == [f"thread event {cited['statement']}"]
    assert findings["summaries"] == [f"summary {cited['summary_id']}"]
    assert findings["checkpoints"] == ["checkpoint wf-1", "tool call wf-1/k1"]


def test_deleting_a_record_blanks_the_cited_event_and_regenerates_summaries_without_it(
        cited, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        touched, findings = purge_and_check(cited["target"])

    assert findings == {"thread_events": [], "summaries": [], "checkpoints": []}
    assert touched["thread_events"] == 1
    event = ThreadEvent.objects.get(pk=cited["statement"])
    assert event.status == "deleted" and event.text == "" and event.seq == 2
    old = Summary.objects.get(pk=cited["summary_id"])
    assert old.status == "stale" and old.text == "" and old.replaced_by_id
    fresh = Summary.objects.get(status="fresh")
    assert "Noted." in fresh.text and cited["statement"] not in fresh.referenced_event_ids
    for row in Summary.objects.all():
        assert "aisle" not in row.text.lower()


def test_a_thread_title_or_metadata_showing_the_record_is_blanked(agent, cited):
    Thread.objects.filter(pk=cited["thread_id"]).update(title="Aisle seat chat", metadata={"topic": "aisle", "n": 2})
    assert registry.read_checks()["thread_events"](cited["target"])[-1] == f"thread {cited['thread_id']}"

    touched, findings = purge_and_check(cited["target"])

    thread = Thread.objects.get(pk=cited["thread_id"])
    assert (thread.title, thread.metadata) == ("", {"topic": "", "n": 2})
    assert findings["thread_events"] == []


def test_checkpoint_and_tool_call_values_that_show_the_record_are_blanked(cited):
    version = Checkpoint.objects.get().version

    purge_and_check(cited["target"])

    checkpoint = Checkpoint.objects.get()
    assert checkpoint.artifacts == {"memory": "", "seat": "", "flight": "TP1234"}
    assert checkpoint.current_step == "book"
    assert checkpoint.version == version + 1  # an old ETag no longer matches
    assert ToolCall.objects.get().arguments == {"seat": "", "row": 12}


def test_the_surfaces_are_idempotent(cited, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        purge_and_check(cited["target"])
    fresh_before = list(Summary.objects.filter(status="fresh").values_list("pk", flat=True))

    with django_capture_on_commit_callbacks(execute=True):
        touched, findings = purge_and_check(cited["target"])

    assert touched == {"thread_events": 0, "summaries": 0, "checkpoints": 0}
    assert list(Summary.objects.filter(status="fresh").values_list("pk", flat=True)) == fresh_before


def test_another_subjects_thread_state_is_untouched(cited, outsider):
    theirs = outsider.post("/api/v1/threads", {}).json()["thread_id"]
    append(outsider, theirs, "I also like the aisle seat.")

    purge_and_check(cited["target"])

    assert ThreadEvent.objects.get(thread_id=theirs).text == "I also like the aisle seat."


def test_a_whole_subject_erasure_removes_every_thread_row_of_the_subject(cited, outsider):
    theirs = outsider.post("/api/v1/threads", {}).json()["thread_id"]
    target = DeletionTarget(tenant_id=cited["target"].tenant_id, subject_id=cited["target"].subject_id,
                            subject_external_id="usr_owner", whole_subject=True)

    touched, findings = purge_and_check(target)

    assert findings == {"thread_events": [], "summaries": [], "checkpoints": []}
    subject_id = cited["target"].subject_id
    for model in (Thread, ThreadEvent, Summary, Checkpoint, ToolCall):
        assert not model.objects.filter(subject_id=subject_id).exists()
    assert Thread.objects.filter(pk=theirs).exists()
