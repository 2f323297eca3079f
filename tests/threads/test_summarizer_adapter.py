"""The OpenAI-compatible summarizer adapter against a real HTTP endpoint (a local chat-completions server)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django_q.conf import Conf

from memory.models import AuditEntry
from memory.threads.errors import SummarizerUnavailable
from memory.threads.models import Summary
from memory.threads.tasks import regenerate_summary
from tests.threads.conftest import append

pytestmark = pytest.mark.django_db
API_KEY = "k-adapter-test-7781"


class ChatServer:
    """A minimal OpenAI-compatible server: records every request, answers according to ``mode``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.mode = "ok"
        # hold_next: the next request waits for ``release`` (after setting ``arrived``): a slow model.
        self.hold_next = False
        self.arrived, self.release = threading.Event(), threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                        "body": body})
                transcript = body["messages"][1]["content"]
                if server.hold_next:
                    server.hold_next = False
                    server.arrived.set()
                    server.release.wait(20)
                replies = {
                    "ok": (200, {"choices": [{"message": {"role": "assistant",
                                                          "content": "MODEL SUMMARY: " + transcript.replace("\n",
                                                                                                          " | ")}}]}),
                    "error": (500, {"error": {"message": "overloaded"}}),
                    "empty": (200, {"choices": []}),
                }
                if server.mode == "garbage":
                    status, raw = 200, b"<html>not json</html>"
                else:
                    status, payload = replies[server.mode]
                    raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def transcripts(self) -> list[str]:
        return [r["body"]["messages"][1]["content"] for r in self.requests]


@pytest.fixture
def chat(settings):
    server = ChatServer()
    server.thread.start()
    settings.ENGRAM_SUMMARIZER_URL = server.url
    settings.ENGRAM_SUMMARIZER_MODEL = "tiny-chat"
    settings.ENGRAM_SUMMARIZER_API_KEY = API_KEY
    settings.ENGRAM_SUMMARIZER_TIMEOUT = 5
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def sync_tasks(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def conversation(agent, thread_id):
    return [
        append(agent, thread_id, "Book a table for two on Friday.").json()["event_id"],
        append(agent, thread_id, "It is for my anniversary with Ana, keep it secret.").json()["event_id"],
        append(agent, thread_id, kind="approval", role="assistant", text="Approve the 40 EUR deposit?",
               data={"approval_id": "ap_9", "status": "requested"}).json()["event_id"],
    ]


def test_summarize_calls_the_configured_endpoint_and_stores_the_models_prose_with_deterministic_sources(
        agent, thread_id, chat):
    ids = conversation(agent, thread_id)

    response = agent.post(f"/api/v1/threads/{thread_id}/summarize", {})

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["summarizer"] == {"name": "openai-compatible", "version": "tiny-chat"}
    assert body["text"].startswith("MODEL SUMMARY: user: Book a table for two on Friday.")
    assert body["referenced_event_ids"] == ids
    assert [(i["type"], i["approval_id"]) for i in body["unresolved"]] == [("pending_approval", "ap_9")]
    assert body["source_range"] == {"from_seq": 1, "to_seq": 3}
    [sent] = chat.requests
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == f"Bearer {API_KEY}"
    assert sent["body"]["model"] == "tiny-chat" and sent["body"]["temperature"] == 0
    assert "anniversary with Ana" in sent["body"]["messages"][1]["content"]


def test_regeneration_after_a_deletion_sends_the_model_none_of_the_deleted_words(
        agent, thread_id, chat, sync_tasks, django_capture_on_commit_callbacks):
    ids = conversation(agent, thread_id)
    first = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()
    assert "Ana" in first["text"]

    with django_capture_on_commit_callbacks(execute=True):
        agent.delete(f"/api/v1/threads/{thread_id}/events/{ids[1]}")

    assert len(chat.requests) == 2
    assert "Ana" not in chat.transcripts()[1] and "anniversary" not in chat.transcripts()[1]
    fresh = agent.get(f"/api/v1/threads/{thread_id}/summary").json()
    assert fresh["regenerates"] == first["summary_id"] and fresh["summarizer"]["name"] == "openai-compatible"
    assert "Book a table" in fresh["text"] and ids[1] not in fresh["referenced_event_ids"]
    for row in Summary.objects.all():
        assert "Ana" not in row.text and "anniversary" not in row.text


@pytest.mark.parametrize("mode", ["error", "garbage", "empty", "unreachable"])
def test_a_failing_service_is_503_with_a_code_and_nothing_is_written(agent, thread_id, chat, settings, mode):
    conversation(agent, thread_id)
    chat.mode = mode if mode != "unreachable" else "ok"
    if mode == "unreachable":
        settings.ENGRAM_SUMMARIZER_URL = "http://127.0.0.1:9/v1"  # discard port: connection refused

    response = agent.post(f"/api/v1/threads/{thread_id}/summarize", {})

    assert response.status_code == 503, response.content
    assert response.json()["code"] == "summarizer_unavailable"
    assert API_KEY not in response.json()["detail"] and "127.0.0.1" not in response.json()["detail"]
    assert not Summary.objects.exists()
    assert not AuditEntry.objects.filter(action="summary.create").exists()


def test_a_failed_regeneration_leaves_the_summary_stale_and_blank_and_a_retry_regenerates_it(
        agent, thread_id, chat, django_capture_on_commit_callbacks):
    ids = conversation(agent, thread_id)
    summary_id = agent.post(f"/api/v1/threads/{thread_id}/summarize", {}).json()["summary_id"]
    with django_capture_on_commit_callbacks(execute=False):  # the queued task is run by hand below
        agent.delete(f"/api/v1/threads/{thread_id}/events/{ids[1]}")
    chat.mode = "error"

    with pytest.raises(SummarizerUnavailable):
        regenerate_summary(summary_id)  # django-q2 records the failure and re-delivers the task

    stale = Summary.objects.get(pk=summary_id)
    assert stale.status == "stale" and stale.text == "" and stale.replaced_by_id is None
    assert Summary.objects.count() == 1
    assert agent.get(f"/api/v1/threads/{thread_id}/summary").status_code == 404
    chat.mode = "ok"
    new_id = regenerate_summary(summary_id)
    assert Summary.objects.get(pk=new_id).status == "fresh"
    assert Summary.objects.get(pk=summary_id).replaced_by_id == new_id
