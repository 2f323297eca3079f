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


def event(seq, text, **kw):
    defaults = {"kind": "message", "role": "user", "status": "recorded", "data": {}}
    return ThreadEvent(pk=f"evt_{seq}", seq=seq, text=text, **{**defaults, **kw})


def test_the_adapter_settings_are_declared_and_off_by_default():
    from django.conf import settings

    assert settings.ENGRAM_SUMMARIZER_URL == ""
    assert settings.ENGRAM_SUMMARIZER_MODEL == "default"
    assert settings.ENGRAM_SUMMARIZER_API_KEY == ""
    assert settings.ENGRAM_SUMMARIZER_TIMEOUT == 30


def test_the_default_summarizer_is_extractive_and_needs_no_service(settings):
    settings.ENGRAM_SUMMARIZER_URL = ""

    summarizer = get_summarizer()

    assert isinstance(summarizer, ExtractiveSummarizer)
    assert (summarizer.name, summarizer.version) == ("extractive", "1")


def test_the_adapter_is_chosen_when_its_url_is_set(settings):
    settings.ENGRAM_SUMMARIZER_URL = "http://llm.internal/v1/"
    settings.ENGRAM_SUMMARIZER_MODEL = "small-model"
    settings.ENGRAM_SUMMARIZER_TIMEOUT = 5

    summarizer = get_summarizer()

    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert (summarizer.name, summarizer.version) == ("openai-compatible", "small-model")
    assert summarizer.config.url == "http://llm.internal/v1" and summarizer.config.timeout == 5.0


def test_the_env_variables_reach_the_settings_module():
    """A fresh interpreter: the variables are read by config/settings.py through the strict helpers."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ENGRAM_SUMMARIZER_URL": "http://llm.internal/v1", "ENGRAM_SUMMARIZER_MODEL": "m-1",
           "ENGRAM_SUMMARIZER_TIMEOUT": "7", "ENGRAM_PROCEDURE_ALLOWED_HOSTS": "a.example, b.example",
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    code = ("from django.conf import settings as s; print(s.ENGRAM_SUMMARIZER_URL, s.ENGRAM_SUMMARIZER_MODEL, "
            "s.ENGRAM_SUMMARIZER_TIMEOUT, s.ENGRAM_PROCEDURE_ALLOWED_HOSTS)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout

    assert out.strip() == "http://llm.internal/v1 m-1 7 ['a.example', 'b.example']"


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
