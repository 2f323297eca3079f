"""The summarizer interface: extractive by default; the OpenAI-compatible adapter only when configured."""

from __future__ import annotations

import json

import pytest

from memory.threads.models import ThreadEvent
from memory.threads.summarizers import (
    ExtractiveSummarizer,
    OpenAICompatibleConfig,
    OpenAICompatibleSummarizer,
    get_summarizer,
)

ENV = ("ENGRAM_SUMMARIZER_URL", "ENGRAM_SUMMARIZER_MODEL", "ENGRAM_SUMMARIZER_API_KEY")


def event(seq, text, **kw):
    defaults = {"kind": "message", "role": "user", "status": "recorded", "data": {}}
    return ThreadEvent(pk=f"evt_{seq}", seq=seq, text=text, **{**defaults, **kw})


def test_the_default_summarizer_is_extractive_and_needs_no_service(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)

    summarizer = get_summarizer()

    assert isinstance(summarizer, ExtractiveSummarizer)
    assert (summarizer.name, summarizer.version) == ("extractive", "1")


def test_the_adapter_is_chosen_when_its_url_is_set(monkeypatch):
    monkeypatch.setenv("ENGRAM_SUMMARIZER_URL", "http://llm.internal/v1/")
    monkeypatch.setenv("ENGRAM_SUMMARIZER_MODEL", "small-model")

    summarizer = get_summarizer()

    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert (summarizer.name, summarizer.version) == ("openai-compatible", "small-model")


def test_the_adapter_builds_a_chat_completions_request_from_live_events_only():
    summarizer = OpenAICompatibleSummarizer(OpenAICompatibleConfig(url="http://llm.internal/v1", model="m",
                                                                   api_key="k-test"))
    events = [event(1, "Fly to Lisbon."), event(2, "", status="deleted"),
              event(3, "Wrong date."), event(4, "Right date.", corrects_id="evt_3")]

    request = summarizer.build_request(events)

    assert request.full_url == "http://llm.internal/v1/chat/completions"
    assert request.get_method() == "POST"
    assert request.get_header("Authorization") == "Bearer k-test"
    body = json.loads(request.data)
    assert body["model"] == "m" and body["temperature"] == 0
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][1]["content"] == "user: Fly to Lisbon.\nuser: Right date."


def test_no_api_key_means_no_authorization_header():
    summarizer = OpenAICompatibleSummarizer(OpenAICompatibleConfig(url="http://llm.internal/v1", model="m"))

    assert summarizer.build_request([event(1, "Hi.")]).get_header("Authorization") is None


def test_extractive_summaries_are_capped_and_say_what_was_left_out():
    events = [event(i, f"Message number {i} " + "x" * 150 + ".") for i in range(1, 40)]

    draft = ExtractiveSummarizer().summarize(events)

    assert len(draft.text) <= 2100
    assert draft.text.endswith("more events)")
    assert len(draft.referenced_event_ids) < 39


@pytest.mark.parametrize("text,unresolved", [("Is it refundable?", True), ("It is refundable.", False)])
def test_a_last_user_question_is_unresolved(text, unresolved):
    draft = ExtractiveSummarizer().summarize([event(1, text)])

    assert bool(draft.unresolved) is unresolved
