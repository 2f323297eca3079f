"""EngramSession behaves as the OpenAI Agents SDK's reference SQLiteSession: the cases of the SDK's own
session test suite, rewritten to run against EngramSession on a live Engram server (with the SDK's
ScriptedModel instead of the suite's fake model; tracing off)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message

from engram_client.openai_agents import EngramSession
from tests.clients.conftest import run_async

pytestmark = pytest.mark.django_db(transaction=True)
OFFLINE = RunConfig(tracing_disabled=True)


@pytest.fixture
def make_session(server: Any) -> Any:
    def make(session_id: str, **kwargs: Any) -> EngramSession:
        return EngramSession(session_id, client=server.aclient("usr_owner"), **kwargs)

    return make


def _run_sync(agent: Agent, value: Any, **kwargs: Any) -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, value, **kwargs)
    finally:
        loop.close()


async def _run(method: str, agent: Agent, value: Any, **kwargs: Any) -> Any:
    if method == "run":
        return await Runner.run(agent, value, run_config=kwargs.pop("run_config", OFFLINE), **kwargs)
    if method == "run_sync":
        return await asyncio.to_thread(_run_sync, agent, value, run_config=kwargs.pop("run_config", OFFLINE),
                                       **kwargs)
    result = Runner.run_streamed(agent, value, run_config=kwargs.pop("run_config", OFFLINE), **kwargs)
    async for _ in result.stream_events():
        pass
    return result


METHODS = ("run", "run_sync", "run_streamed")  # each case runs through the three ways of running an agent


async def _turns_and_sessions(method: str, make_session: Any) -> None:
    model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")],
                           [assistant_message("I like dogs")], [assistant_message("You mentioned cats")]])
    agent = Agent(name="test", model=model)
    cats, dogs = make_session(f"cats-{method}"), make_session(f"dogs-{method}")
    assert (await _run(method, agent, "I like cats", session=cats)).final_output == "San Francisco"
    assert (await _run(method, agent, "What state?", session=cats)).final_output == "California"
    assert len(model.calls[-1].input) > 1
    await _run(method, agent, "I like dogs", session=dogs)
    assert (await _run(method, agent, "What do I like?", session=cats)).final_output == "You mentioned cats"
    assert "dogs" not in str(model.calls[-1].input) and "cats" in str(model.calls[-1].input)


def test_memory_across_turns_and_separate_sessions(make_session: Any) -> None:
    for method in METHODS:
        run_async(_turns_and_sessions(method, make_session))


def test_without_a_session_there_is_no_history() -> None:
    for method in METHODS:
        model = ScriptedModel([[assistant_message("Hello")], [assistant_message("I don't remember")]])
        agent = Agent(name="test", model=model)
        run_async(_run(method, agent, "Hi there"))
        run_async(_run(method, agent, "Do you remember?"))
        assert len(model.calls[-1].input) == 1


def test_add_get_clear(make_session: Any) -> None:
    session = make_session("direct")

    async def run() -> None:
        await session.add_items([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}])
        items = await session.get_items()
        assert [(i["role"], i["content"]) for i in items] == [("user", "Hello"), ("assistant", "Hi there!")]
        await session.clear_session()
        assert await session.get_items() == []

    run_async(run())


def test_pop_item(make_session: Any) -> None:
    session = make_session("pop")

    async def run() -> None:
        assert await session.pop_item() is None
        await session.add_items([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"},
                                 {"role": "user", "content": "How are you?"}])
        assert len(await session.get_items()) == 3
        assert await session.pop_item() == {"role": "user", "content": "How are you?"}
        assert (await session.get_items())[-1]["content"] == "Hi there!"
        assert await session.pop_item() == {"role": "assistant", "content": "Hi there!"}
        assert await session.pop_item() == {"role": "user", "content": "Hello"}
        assert await session.pop_item() is None
        assert await session.get_items() == []

    run_async(run())


def test_pop_only_affects_its_own_session(make_session: Any) -> None:
    one, two = make_session("session_1"), make_session("session_2")

    async def run() -> None:
        await one.add_items([{"role": "user", "content": "Session 1 message"}])
        await two.add_items([{"role": "user", "content": "Session 2 message 1"},
                             {"role": "user", "content": "Session 2 message 2"}])
        assert (await two.pop_item())["content"] == "Session 2 message 2"
        assert [i["content"] for i in await one.get_items()] == ["Session 1 message"]
        assert [i["content"] for i in await two.get_items()] == ["Session 2 message 1"]

    run_async(run())


def test_get_items_with_limit(make_session: Any) -> None:
    session = make_session("count")
    contents = ["Message 1", "Response 1", "Message 2", "Response 2", "Message 3", "Response 3"]

    async def run() -> None:
        await session.add_items([{"role": "user" if n % 2 == 0 else "assistant", "content": c}
                                 for n, c in enumerate(contents)])

        async def latest(limit: int | None) -> list[str]:
            return [i["content"] for i in await session.get_items(limit=limit)]

        assert await latest(None) == contents
        assert await latest(2) == contents[-2:]
        assert await latest(4) == contents[-4:]
        assert await latest(10) == contents
        assert await latest(0) == []
        assert await latest(-1) == contents  # SQLite's LIMIT -1: no limit

    run_async(run())


async def _history_then(method: str, session: EngramSession, model: ScriptedModel, history: list[Any],
                        new: list[Any], **kwargs: Any) -> None:
    await session.add_items(history)
    await _run(method, Agent(name="test", model=model), new, session=session, **kwargs)


def test_list_input_is_appended_to_history(make_session: Any) -> None:
    history = [{"role": "user", "content": "Earlier message"}, {"role": "assistant", "content": "Saved reply"}]
    new = [{"role": "user", "content": "Test message"}]
    for method in METHODS:
        model = ScriptedModel([[assistant_message("This should run")]])
        run_async(_history_then(method, make_session(f"list-{method}"), model, history, new))
        assert model.calls[-1].input == history + new


def test_session_input_callback(make_session: Any) -> None:
    history = [{"role": "user", "content": "Hello there."}, {"role": "assistant", "content": "Hi, I'm here."}]
    new = [{"role": "user", "content": "What your name?"}]

    def only_user_messages(past: list[Any], new_input: list[Any]) -> list[Any]:
        return [item for item in past if item["role"] == "user"] + new_input

    for method in METHODS:
        model = ScriptedModel([[assistant_message("I'm a model")]])
        run_async(_history_then(method, make_session(f"callback-{method}"), model, history, new,
                                run_config=RunConfig(tracing_disabled=True, session_input_callback=only_user_messages)))
        assert model.calls[-1].input == [history[0], new[0]]


def test_unicode_special_characters_and_sql_keywords(make_session: Any) -> None:
    session = make_session("unicode")
    contents = ["こんにちは", "😊👍", "Привет", "O'Reilly", "DROP TABLE sessions;",
                '"SELECT * FROM users WHERE name = "admin";"', "Robert'); DROP TABLE students;--", "Normal message"]

    async def run() -> list[Any]:
        await session.add_items([{"role": "user", "content": c} for c in contents])
        return await session.get_items()

    assert [i["content"] for i in run_async(run())] == contents


def test_concurrent_writers_each_with_their_own_event_loop(make_session: Any) -> None:
    session = make_session("concurrent")

    def add(item: Any) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(session.add_items([item]))
        loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as executor:
        list(executor.map(add, [{"role": "user", "content": f"Message {i}"} for i in range(10)]))
    assert {i["content"] for i in run_async(session.get_items())} == {f"Message {i}" for i in range(10)}


def test_session_settings(make_session: Any) -> None:
    assert make_session("defaults").session_settings.limit is None
    assert make_session("constructor", session_settings=SessionSettings(limit=5)).session_settings.limit == 5
    limited = make_session("limited", session_settings=SessionSettings(limit=3))

    async def run() -> None:
        await limited.add_items([{"role": "user", "content": f"Message {i}"} for i in range(10)])
        assert [i["content"] for i in await limited.get_items()] == ["Message 7", "Message 8", "Message 9"]
        assert [i["content"] for i in await limited.get_items(limit=2)] == ["Message 8", "Message 9"]

    run_async(run())


def test_run_config_overrides_the_session_limit(make_session: Any) -> None:
    session = make_session("override", session_settings=SessionSettings(limit=100))
    model = ScriptedModel([[assistant_message("Got it")]])

    async def run() -> None:
        await session.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
        await Runner.run(Agent(name="test", model=model), "New question", session=session,
                         run_config=RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=2)))

    run_async(run())
    history = [i for i in model.calls[-1].input if i.get("content") != "New question"]
    assert [i["content"] for i in history] == ["Turn 8", "Turn 9"]
