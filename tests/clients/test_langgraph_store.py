"""EngramStore over real HTTP: through compiled LangGraph graphs (a node that writes and reads memory,
LangMem's memory tools), then the BaseStore semantics one by one, and isolation."""

from __future__ import annotations

import math
import threading
from datetime import datetime
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError

from engram_client.langgraph import EngramStore
from tests.clients.conftest import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("run_tasks_inline")]


@pytest.fixture
def store(server: Any) -> EngramStore:
    return EngramStore(client=server.client("usr_owner"), aclient=server.aclient("usr_owner"))


class State(TypedDict, total=False):
    message: str
    recalled: list[str]


def _graph(store: BaseStore) -> Any:
    def remember(state: State, config: RunnableConfig) -> State:
        user = config["configurable"]["user_id"]
        get_store().put(("memories", user), "favourite_city", {"content": state["message"]})
        return {}

    def recall(state: State, config: RunnableConfig) -> State:
        user = config["configurable"]["user_id"]
        found = get_store().search(("memories", user), query="Which city does the user love?")
        return {"recalled": [item.value["content"] for item in found]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_compiled_graph_writes_and_reads_memory_in_its_nodes(store: EngramStore, server: Any) -> None:
    graph = _graph(store)
    result = graph.invoke({"message": "I love Lisbon"}, {"configurable": {"user_id": "alice"}})
    assert result["recalled"] == ["I love Lisbon"]

    # In Engram it is an explicit statement in the plain-label namespace, with its provenance.
    record = server.client("usr_owner").fact("user/memories/alice", "favourite_city")
    assert (record.value, record.text, record.source.type, record.status) == (
        {"content": "I love Lisbon"}, "I love Lisbon", "explicit_user_statement", "active")

    async def run_graph() -> Any:
        return await graph.ainvoke({"message": "I love Porto"}, {"configurable": {"user_id": "alice"}})

    assert run_async(run_graph())["recalled"] == ["I love Porto"]
    history = server.client("usr_owner").history(
        server.client("usr_owner").fact("user/memories/alice", "favourite_city").memory_id)
    assert [m.value["content"] for m in history] == ["I love Lisbon", "I love Porto"]


def test_langmems_memory_tools_work_unchanged(store: EngramStore) -> None:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"))
    search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"), response_format="content")

    def agent(state: State) -> State:
        manage.invoke({"content": "The user is allergic to cats", "action": "create"})
        manage.invoke({"content": "The user prefers tea over coffee", "action": "create"})
        found = search.invoke({"query": "allergy"})
        memory_id = next(item["key"] for item in _as_list(found) if "cats" in item["value"]["content"])
        manage.invoke({"content": "The user is allergic to dogs", "action": "update", "id": memory_id})
        after_update = search.invoke({"query": "allergy"})
        tea = next(item["key"] for item in _as_list(after_update) if "tea" in item["value"]["content"])
        manage.invoke({"action": "delete", "id": tea})
        return {"recalled": [i["value"]["content"] for i in _as_list(search.invoke({"query": "what do we know"}))]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(store=store)
    result = graph.invoke({"message": ""}, {"configurable": {"langgraph_user_id": "bob"}})
    assert result["recalled"] == ["The user is allergic to dogs"]


def _as_list(found: Any) -> list[dict[str, Any]]:
    import json

    return json.loads(found) if isinstance(found, str) else found


def test_put_get_search_delete_read_after_write(store: EngramStore) -> None:
    assert store.get(("docs",), "a") is None
    store.put(("docs",), "a", {"text": "first"})
    assert store.get(("docs",), "a").value == {"text": "first"}
    store.put(("docs",), "a", {"text": "second"})
    assert store.get(("docs",), "a").value == {"text": "second"}
    store.put(("docs", "sub"), "b", {"text": "below"})
    assert [(i.namespace, i.key) for i in store.search(("docs",))] == [(("docs",), "a"), (("docs", "sub"), "b")]
    store.delete(("docs",), "a")
    assert store.get(("docs",), "a") is None
    assert [i.key for i in store.search(("docs",))] == ["b"]
    store.put(("docs",), "a", {"text": "back again"})
    assert store.get(("docs",), "a").value == {"text": "back again"}


def test_a_delete_is_visible_at_once_while_its_deletion_job_waits(server: Any, monkeypatch: Any) -> None:
    from django_q.conf import Conf

    from memory.deletion.models import DeletionJob

    monkeypatch.setattr(Conf, "SYNC", False)  # no worker: the job stays pending
    store = EngramStore(client=server.client("usr_owner"), aclient=server.aclient("usr_owner"))
    store.put(("notes",), "n1", {"text": "pick up the keys"})
    store.delete(("notes",), "n1")
    assert DeletionJob.objects.get().status == "pending"
    assert store.get(("notes",), "n1") is None
    assert store.search(("notes",)) == [] and store.search(("notes",), query="keys") == []
    assert store.list_namespaces() == []


def test_any_label_round_trips_and_plain_labels_stay_readable(store: EngramStore, server: Any) -> None:
    odd = ("Users", "a*b", "with space", "trailing\n", "émoji ☃", "_x", "*")
    store.put(odd, "My Key!", {"v": 1})
    store.put(("users", "alice", "prefs"), "theme", {"v": 2})
    assert store.get(odd, "My Key!").namespace == odd
    assert store.get(odd, "My Key!").key == "My Key!"
    assert store.list_namespaces() == sorted([odd, ("users", "alice", "prefs")])
    namespaces = {tuple(m.namespace) for m in server.client("usr_owner").list().results}
    assert ("user", "users", "alice", "prefs") in namespaces  # plain labels unchanged in Engram

    deep = tuple(f"level{n}" for n in range(7))
    store.put(deep, "k", {"deep": True})
    assert store.get(deep, "k").value == {"deep": True}
    with pytest.raises(InvalidNamespaceError):
        store.put((*deep, "eighth"), "k", {"too": "deep"})
    assert store.get((*deep, "eighth"), "k") is None


def test_values_and_timestamps_round_trip(store: EngramStore) -> None:
    value = {"text": "Grüße", "n": 3, "f": 0.1, "big": 2**53, "flag": False, "none": None,
             "nested": {"list": [1, "two", {"three": 3.5}], "empty": {}}, "": "empty key"}
    store.put(("values",), "v", value)
    item = store.get(("values",), "v")
    assert item.value == value and set(item.value) == set(value)
    assert isinstance(item.created_at, datetime) and item.created_at.tzinfo is not None
    assert item.updated_at == item.created_at
    store.put(("values",), "w", {"x": 1})
    later = store.get(("values",), "w")
    assert 0 < (later.created_at - item.created_at).total_seconds() < 60
    assert item.created_at.microsecond or later.created_at.microsecond  # sub-second resolution
    with pytest.raises(ValueError):
        store.put(("values",), "nan", {"x": math.nan})
    with pytest.raises(ValueError):  # PostgreSQL cannot hold NUL: refused before the request, never a 500
        store.put(("values",), "nul", {"x": "a\x00b"})


def test_search_filters_with_every_operator_and_non_finite_bounds(store: EngramStore) -> None:
    for key, score, colour in [("a", 1.0, "red"), ("b", 2.5, "blue"), ("c", 4.0, "red")]:
        store.put(("items",), key, {"score": score, "colour": colour, "meta": {"size": key}})

    def keys(flt: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in store.search(("items",), filter=flt))

    assert keys({"colour": "red"}) == ["a", "c"]
    assert keys({"colour": {"$eq": "blue"}}) == ["b"]
    assert keys({"colour": {"$ne": "red"}}) == ["b"]
    assert keys({"score": {"$gt": 1.0}}) == ["b", "c"]
    assert keys({"score": {"$gte": 2.5, "$lt": 4.0}}) == ["b"]
    assert keys({"score": {"$lte": 2.5}}) == ["a", "b"]
    assert keys({"score": {"$lt": math.inf}}) == ["a", "b", "c"]
    assert keys({"score": {"$gt": -math.inf}}) == ["a", "b", "c"]
    assert keys({"score": {"$gt": math.inf}}) == []
    assert keys({"meta": {"size": "c"}}) == ["c"]
    page = store.search(("items",), filter={"colour": "red"}, limit=1, offset=1)
    assert [i.key for i in page] == ["c"]


def test_a_dotted_filter_key_is_a_path_into_nested_values(store: EngramStore) -> None:
    store.put(("people",), "ann", {"user": {"access-level": "nested", "age": 41, "team": {"name": "core"}}})
    store.put(("people",), "bob", {"user": {"access-level": "flat", "age": 29}})
    store.put(("people",), "cy", {"user": "not an object", "user.age": 50})

    def keys(flt: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in store.search(("people",), filter=flt))

    assert keys({"user.access-level": "nested"}) == ["ann"]
    assert keys({"user.team.name": "core"}) == ["ann"]
    assert keys({"user.access-level": {"$eq": "flat"}}) == ["bob"]
    assert keys({"user.access-level": {"$ne": "nested"}}) == ["bob", "cy"]
    # cy has the literal top-level key "user.age", which InMemoryStore reads first
    assert keys({"user.age": {"$gt": 30}}) == ["ann", "cy"]
    assert keys({"user.age": {"$gte": 29, "$lt": 41}}) == ["bob"]
    assert keys({"user.age": {"$lte": 29}}) == ["bob"]
    assert keys({"user.missing": None}) == ["ann", "bob", "cy"]
    assert keys({"user.team": {"name": "core"}}) == ["ann"]


def test_a_query_orders_by_similarity_and_drops_nothing(store: EngramStore) -> None:
    store.put(("pets",), "cat", {"text": "The user has a cat called Mia"})
    store.put(("pets",), "car", {"text": "The user drives an old Volvo"})
    store.put(("pets",), "bird", {"text": "A parrot named Kiwi lives with the user"})
    found = store.search(("pets",), query="What is the name of the user's cat?")
    assert found[0].key == "cat" and found[0].score is not None
    assert {i.key for i in found} == {"cat", "car", "bird"}
    assert [i.key for i in store.search(("pets",), query="cat", limit=1, offset=0)] == ["cat"]


def test_list_namespaces_sorts_then_pages_and_filters(store: EngramStore) -> None:
    for ns in [("b", "x"), ("a", "y", "z"), ("a", "b"), ("c",), ("a", "y", "w")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b"), ("a", "y", "w"), ("a", "y", "z"), ("b", "x"), ("c",)]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "y", "w"), ("a", "y", "z")]
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "y")]
    assert store.list_namespaces(suffix=("z",)) == [("a", "y", "z")]
    assert store.list_namespaces(prefix=("*", "y")) == [("a", "y", "w"), ("a", "y", "z")]


def test_a_batch_reads_before_its_puts_and_the_last_put_wins(store: EngramStore) -> None:
    from langgraph.store.base import GetOp, PutOp

    store.put(("batch",), "k", {"v": "old"})
    results = store.batch([PutOp(("batch",), "k", {"v": 1}), GetOp(("batch",), "k"), PutOp(("batch",), "k", {"v": 2})])
    assert results[1].value == {"v": "old"}
    assert store.get(("batch",), "k").value == {"v": 2}


def test_several_threads_each_with_its_own_event_loop(store: EngramStore) -> None:
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            async def run() -> None:
                await store.aput(("threads",), f"k{n}", {"n": n})
                assert (await store.aget(("threads",), f"k{n}")).value == {"n": n}

            run_async(run())
            store.put(("threads", "sync"), f"k{n}", {"n": n})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(i.key for i in store.search(("threads",), limit=20)) == sorted(
        [f"k{n}" for n in range(4)] * 2)


def test_candidate_mode_puts_proposals_that_are_not_facts_yet(server: Any) -> None:
    store = EngramStore(client=server.client("usr_owner"), aclient=server.aclient("usr_owner"), mode="candidate")
    store.put(("inferred",), "hobby", {"text": "Probably enjoys hiking"})
    assert store.get(("inferred",), "hobby") is None
    export = server.client("usr_owner").export()
    assert [c["fact"]["value"] for c in export["candidates"]] == [{"text": "Probably enjoys hiking"}]


def test_another_principal_sees_nothing_through_the_store(store: EngramStore, server: Any) -> None:
    store.put(("memories", "alice"), "secret_plan", {"text": "Surprise party on Friday"})
    theirs = EngramStore(client=server.client("usr_outsider"), aclient=server.aclient("usr_outsider"))
    assert theirs.get(("memories", "alice"), "secret_plan") is None
    assert theirs.search(("memories",)) == [] and theirs.search((), query="party") == []
    assert theirs.list_namespaces() == []
    theirs.delete(("memories", "alice"), "secret_plan")  # a no-op for them
    assert store.get(("memories", "alice"), "secret_plan").value == {"text": "Surprise party on Friday"}
