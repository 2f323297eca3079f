"""Deletions racing every read and derived path that can quote a record, with a real worker.

While single records of one subject are deleted a fraction of a second apart, other clients of the same
subject keep retrieving (each retrieve writes a log), appending to a thread, summarising it, submitting
candidates (consolidated by the worker), writing episodes (context windows, by the worker) and exporting.
Every job must complete, and afterwards nothing in the database quotes a deleted record.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memory.deletion.models import DeletionJob
from tests.conftest import Agent, memory_body, wait_for
from tests.deletion.helpers import tables_containing

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

RECORDS = 12
DELETE_EVERY = 0.3  # seconds between two DELETEs
MARKERS = [f"racemark{n:03d}q" for n in range(RECORDS)]


def _client_like(agent: Agent) -> Agent:
    """The same principal with a client of its own: each traffic thread talks over its own client."""
    return Agent(client=APIClient(), key=agent.key, token=agent.token, tenant=agent.tenant, subject=agent.subject)


class Traffic:
    """Threads that keep using the subject until stopped; each counts its calls and its server errors."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.calls: dict[str, int] = {}
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    def run(self, name: str, agent: Agent, step: Any) -> None:
        def loop() -> None:
            n = 0
            try:
                while not self.stop.is_set():
                    response = step(agent, n)
                    if response is not None and response.status_code >= 500:
                        self.errors.append(f"{name}: {response.status_code}")
                    n += 1
                    self.calls[name] = n
            finally:
                connection.close()

        thread = threading.Thread(target=loop, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def _seed(agent: Agent) -> tuple[list[str], str]:
    """Records quoting their marker everywhere: a thread event as their source, a summary over it, episodes
    (context windows) and preferences, all retrieved once so that logs quote them."""
    thread_id = agent.post("/api/v1/threads", {"title": "race"}).json()["thread_id"]
    ids = []
    for n, marker in enumerate(MARKERS):
        said = f"Remember that I like {marker} things"
        event = agent.post(f"/api/v1/threads/{thread_id}/events", {"kind": "message", "role": "user", "text": said})
        assert event.status_code == 201, event.json()
        episode = n % 2 == 0
        body = memory_body(
            namespace=["episodes"] if episode else ["user", "travel_preferences"],
            kind="episode" if episode else "preference",
            fact={"field": f"race_{n}", "value": f"{marker} value"}, text=f"Likes {marker} on trips",
            source={"type": "explicit_user_statement", "event_id": event.json()["event_id"], "text": said})
        created = agent.post("/api/v1/memories", body)
        assert created.status_code == 201, created.json()
        ids.append(created.json()["memory_id"])
    summary = agent.post(f"/api/v1/threads/{thread_id}/summaries", {
        "text": "The user listed things they like on trips.", "from_seq": 1, "to_seq": len(MARKERS)})
    assert summary.status_code == 201, summary.json()
    return ids, thread_id


def _delete(agent: Agent, memory_id: str) -> Any:
    """DELETE as a client does: a 503 ``database_busy`` says to retry the same request shortly."""
    for _ in range(10):
        response = agent.delete(f"/api/v1/memories/{memory_id}")
        if response.status_code != 503:
            return response
        time.sleep(0.2)
    return response


def _retrieve(agent: Agent, n: int) -> Any:
    # Words every record shares, so that deleted and live records alike are candidates of every call.
    return agent.post("/api/v1/retrieve", {"query": "likes on trips", "limit": 5,
                                           "include": ["memory", "summaries"]})


def test_it_completes_every_deletion_while_the_subject_is_in_use(agent, qcluster):
    ids, thread_id = _seed(agent)
    traffic = Traffic()
    for name in ("retrieve-1", "retrieve-2"):
        traffic.run(name, _client_like(agent), _retrieve)

    def append_and_summarise(a: Agent, n: int) -> Any:
        event = a.post(f"/api/v1/threads/{thread_id}/events",
                       {"kind": "message", "role": "user", "text": f"turn {n} about the weather"})
        if n % 5 == 4:
            return a.post(f"/api/v1/threads/{thread_id}/summaries", {
                "text": f"Talked about the weather ({n}).", "from_seq": 1,
                "to_seq": event.json().get("seq", 1) if event.status_code == 201 else 1})
        return event

    def write(a: Agent, n: int) -> Any:
        if n % 2:
            return a.post("/api/v1/candidates", memory_body(
                namespace=["user", "inferred"], kind="preference", fact={"field": f"guess_{n}", "value": "tea"},
                text=f"Might like tea on trips ({n})",
                source={"type": "model_inferred", "event_id": f"evt_guess_{n}", "text": "mentioned tea"}))
        return a.post("/api/v1/memories", memory_body(
            namespace=["episodes"], kind="episode", fact={"field": f"walk_{n}", "value": "walk"},
            text=f"Went for a walk on trips ({n})",
            source={"type": "explicit_user_statement", "event_id": f"evt_walk_{n}", "text": "went for a walk"}))

    def export(a: Agent, n: int) -> Any:
        time.sleep(0.2)
        return a.get("/api/v1/export")

    traffic.run("thread", _client_like(agent), append_and_summarise)
    traffic.run("write", _client_like(agent), write)
    traffic.run("export", _client_like(agent), export)

    jobs = []
    try:
        time.sleep(1.0)
        for memory_id in ids:
            response = _delete(agent, memory_id)
            assert response.status_code == 202, response.json()
            jobs.append(response.json()["deletion_id"])
            time.sleep(DELETE_EVERY)
        wait_for(lambda: not DeletionJob.objects.filter(pk__in=jobs, status__in=["pending", "running"]).exists(),
                 timeout=120, interval=0.5)
    finally:
        traffic.join()

    failed = dict(DeletionJob.objects.filter(pk__in=jobs).exclude(status="completed").values_list("pk", "reason"))
    print(f"race: {len(jobs)} deletions, {len(failed)} not completed, traffic {traffic.calls}")
    assert failed == {}
    # ... and none of them on an automatic retry: the first run finished each one.
    assert list(DeletionJob.objects.filter(pk__in=jobs, retries__gt=0).values_list("pk", flat=True)) == []
    assert traffic.errors == []
    assert min(traffic.calls.values()) > 0
    for marker in MARKERS:
        assert tables_containing(marker) == [], marker
