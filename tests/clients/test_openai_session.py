"""EngramSession over real HTTP: the OpenAI Agents SDK's Runner with a scripted offline model (the SDK's own
ScriptedModel; no network, tracing off), the SDK's EncryptedSession on top, Engram's governance (secrets,
sizes) and isolation. The SQLiteSession parity cases are in test_openai_sqlite_parity.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.extensions.memory import EncryptedSession
from agents.testing import ScriptedModel, assistant_message, function_call
from cryptography.fernet import Fernet

from engram_client import InvalidRequest, SecretDetected
from engram_client.openai_agents import EngramSession
from tests.clients.conftest import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("run_tasks_inline")]
OFFLINE = RunConfig(tracing_disabled=True)


@pytest.fixture
def session(server: Any) -> EngramSession:
    return EngramSession("support-42", client=server.aclient("usr_owner"))


def test_runner_keeps_the_conversation_in_an_engram_thread(session: EngramSession, server: Any) -> None:
    @function_tool
    def order_status(order_id: str) -> str:
        """Look an order up."""
        return f"Order {order_id} shipped yesterday"

    model = ScriptedModel([[function_call("order_status", {"order_id": "A7"}, call_id="call-1")],
                           [assistant_message("Your order A7 shipped yesterday.")],
                           [assistant_message("You asked about order A7.")]])
    agent = Agent(name="support", model=model, tools=[order_status])

    async def conversation() -> Any:
        first = await Runner.run(agent, "Where is my order A7?", session=session, run_config=OFFLINE)
        second = await Runner.run(agent, "What did I ask before?", session=session, run_config=OFFLINE)
        return first, second

    first, second = run_async(conversation())
    assert first.final_output == "Your order A7 shipped yesterday."
    assert second.final_output == "You asked about order A7."
    history = model.calls[-1].input
    assert history[0] == {"role": "user", "content": "Where is my order A7?"}
    assert [i.get("type") for i in history[1:3]] == ["function_call", "function_call_output"]
    assert history[-1] == {"role": "user", "content": "What did I ask before?"}

    thread_id = run_async(session.thread_id())
    events = server.client("usr_owner").threads.events(thread_id).results
    assert [(e.kind, e.role) for e in events] == [
        ("message", "user"), ("tool_call", "assistant"), ("tool_result", "tool"), ("message", "assistant"),
        ("message", "user"), ("message", "assistant")]
    assert events[1].data["tool"] == "order_status" and events[2].text == "Order A7 shipped yesterday"
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]


def test_items_round_trip_exactly_with_keys_order_and_types(session: EngramSession) -> None:
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": "Résumé ☃"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": None},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\": 1.5}", "id": "fc_1",
         "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "", "extra": {"n": [1, None, True]}},
        {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
         "content": [{"type": "output_text", "text": "", "annotations": []}]},
    ]

    async def run() -> list[Any]:
        await session.add_items(items)
        return await session.get_items()

    assert run_async(run()) == items


def test_the_encrypted_session_wrapper_stores_opaque_tokens(session: EngramSession, server: Any) -> None:
    key = Fernet.generate_key().decode()
    encrypted = EncryptedSession("support-42", session, key, ttl=60)
    model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")]])
    agent = Agent(name="geo", model=model)

    async def run() -> tuple[list[Any], list[Any]]:
        await Runner.run(agent, "Which city has the Golden Gate Bridge?", session=encrypted, run_config=OFFLINE)
        result = await Runner.run(agent, "Which state?", session=encrypted, run_config=OFFLINE)
        assert result.final_output == "California"
        many = [{"role": "user", "content": f"note {n}"} for n in range(60)]  # 60 high-entropy envelopes
        await encrypted.add_items(many)
        return await encrypted.get_items(), await session.get_items()

    clear, stored = run_async(run())
    assert any("Golden Gate" in str(i.get("content")) for i in model.calls[-1].input)
    assert clear[-1] == {"role": "user", "content": "note 59"} and len(clear) == 64
    assert all(set(i) == {"__enc__", "v", "kid", "payload"} for i in stored)
    assert "Golden Gate" not in str(server.client("usr_owner").export())

    # Past the TTL the wrapper skips expired envelopes. Fernet reads the clock in its compiled core (no Python clock
    # to move), so a reader of the same session with a one-second TTL waits until every envelope is two seconds old.
    time.sleep(2.1)
    assert run_async(EncryptedSession("support-42", session, key, ttl=1).get_items()) == []
    run_async(encrypted.clear_session())
    assert run_async(session.get_items()) == []


def test_a_secret_is_refused_and_nothing_of_that_call_is_stored(session: EngramSession) -> None:
    async def run() -> None:
        await session.add_items([{"role": "user", "content": "hello"}])
        with pytest.raises(SecretDetected):
            await session.add_items([{"role": "user", "content": "fine"},
                                     {"role": "user", "content": "my password is hunter2-x"}])

    run_async(run())
    assert run_async(session.get_items()) == [{"role": "user", "content": "hello"}]
    with pytest.raises(ValueError):  # PostgreSQL cannot hold NUL: refused before the request, never a 500
        run_async(session.add_items([{"role": "user", "content": "a\x00b"}]))


def test_large_items_fit_up_to_the_event_limit(session: EngramSession) -> None:
    big = {"type": "function_call_output", "call_id": "c9", "output": "lorem ipsum " * 15_000}  # 180 kB
    run_async(session.add_items([big]))
    assert run_async(session.get_items(limit=1)) == [big]
    with pytest.raises(InvalidRequest) as refused:
        run_async(session.add_items([{"type": "function_call_output", "call_id": "c10", "output": "x" * 300_000}]))
    assert "data" in refused.value.detail


def test_another_principal_with_the_same_session_id_sees_nothing(session: EngramSession, server: Any) -> None:
    run_async(session.add_items([{"role": "user", "content": "my private question"}]))
    theirs = EngramSession("support-42", client=server.aclient("usr_outsider"))
    assert run_async(theirs.get_items()) == []
    assert run_async(theirs.pop_item()) is None
    run_async(theirs.clear_session())
    assert run_async(theirs.thread_id()) != run_async(session.thread_id())
    assert run_async(session.get_items()) == [{"role": "user", "content": "my private question"}]


def test_a_cleared_session_goes_through_the_deletion_machinery(session: EngramSession, server: Any) -> None:
    from memory.deletion.models import DeletionJob

    run_async(session.add_items([{"role": "user", "content": "remember the blue door"}]))
    run_async(session.clear_session())
    job = DeletionJob.objects.get(kind="thread")
    assert job.status == "completed" and job.steps.filter(name="verification", status="done").exists()
    assert "blue door" not in str(server.client("usr_owner").export())


def test_settings_given_as_a_dict_limit_what_runner_run_reads(server: Any) -> None:
    session = EngramSession("limited", client=server.aclient("usr_owner"), session_settings={"limit": 2})
    model = ScriptedModel([[assistant_message("One.")], [assistant_message("Two.")]])
    agent = Agent(name="support", model=model)

    async def conversation() -> None:
        await Runner.run(agent, "First question", session=session, run_config=OFFLINE)
        await Runner.run(agent, "Second question", session=session, run_config=OFFLINE)

    run_async(conversation())
    assert session.session_settings.limit == 2
    # the latest two stored items (the first turn's question and answer) and the new question
    history = model.calls[-1].input
    assert history[0] == {"role": "user", "content": "First question"}
    assert len(history) == 3 and history[-1] == {"role": "user", "content": "Second question"}


def test_an_unknown_settings_key_is_refused_at_construction(server: Any) -> None:
    with pytest.raises(TypeError, match="limitt"):
        EngramSession("limited", client=server.aclient("usr_owner"), session_settings={"limitt": 5})
