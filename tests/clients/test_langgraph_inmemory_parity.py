"""EngramStore behaves as LangGraph's reference InMemoryStore: the cases of LangGraph's own store test suite
(namespace listing, validation, batching semantics, vector search with a configured embedding function),
rewritten to run against EngramStore on a live Engram server. The one scaled-down case says so."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import InvalidNamespaceError, PutOp

from engram_client.langgraph import EngramStore
from tests.clients.conftest import run_async

pytestmark = pytest.mark.django_db(transaction=True)


class LetterEmbeddings(Embeddings):
    """Deterministic test embeddings: a text's character frequencies, each character projected onto the
    dimensions by a fixed pseudo-random vector (so texts sharing characters are similar)."""

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims

    def _projection(self, char: str) -> list[float]:
        seed = ord(char) * 2654435761 % 2**32
        out = []
        for _ in range(self.dims):
            seed = (1103515245 * seed + 12345) % 2**31
            out.append(seed / 2**31 - 0.5)
        return out

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for char in text:
            for i, p in enumerate(self._projection(char)):
                vector[i] += p
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


@pytest.fixture
def make_store(server: Any) -> Any:
    def make(**kwargs: Any) -> EngramStore:
        return EngramStore(client=server.client("usr_owner"), aclient=server.aclient("usr_owner"), **kwargs)

    return make


@pytest.fixture
def store(make_store: Any) -> EngramStore:
    return make_store()


@pytest.fixture
def vstore(make_store: Any) -> EngramStore:
    return make_store(index={"dims": 64, "embed": LetterEmbeddings()})


# --- list_namespaces --------------------------------------------------------------------------------------


def test_list_namespaces_basic(store: EngramStore) -> None:
    namespaces = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"),
                  ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789")]
    for i, ns in enumerate(namespaces):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})

    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"),
                                                         ("a", "b", "f")]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(store: EngramStore) -> None:
    for i, ns in enumerate([("users", "123"), ("users", "456"), ("users", "789", "settings"),
                            ("admin", "users", "789"), ("guests", "123"), ("guests", "456", "preferences")]):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert store.list_namespaces(prefix=("users", "*")) == [("users", "123"), ("users", "456"),
                                                            ("users", "789", "settings")]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []


def test_list_namespaces_pagination(store: EngramStore) -> None:
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


def test_list_namespaces_max_depth_no_conditions_and_empty(store: EngramStore) -> None:
    assert store.list_namespaces() == []
    for i, ns in enumerate([("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"),
                            ("h", "i", "j", "k")]):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert store.list_namespaces() == [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"),
                                       ("h", "i", "j", "k")]


# --- namespace validation and the batch path ---------------------------------------------------------------


def test_cannot_put_an_invalid_namespace_but_the_batch_path_takes_langgraph(store: EngramStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            run_async(store.aput(bad, "foo", doc))

    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.get(("foo", "langgraph", "foo"), "bar").value == doc
    assert store.search(("foo", "langgraph", "foo"), query="bar")[0].value == doc
    store.delete(("foo", "langgraph", "foo"), "bar")
    assert store.get(("foo", "langgraph", "foo"), "bar") is None

    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert store.get(("langgraph", "foo"), "bar").value == doc
    assert store.search(("langgraph", "foo"))[0].value == doc
    store.delete(("langgraph", "foo"), "bar")
    assert store.get(("langgraph", "foo"), "bar") is None


def test_concurrent_async_calls_see_each_other_in_call_order(store: EngramStore) -> None:
    async def run() -> None:
        await asyncio.gather(store.aput(("test",), "same", {"value": "same"}),
                             store.aput(("test",), "different", {"value": "different"}))
        same, again, different = await asyncio.gather(store.aget(("test",), "same"), store.aget(("test",), "same"),
                                                      store.aget(("test",), "different"))
        assert same == again and same != different
        assert (same.value, different.value) == ({"value": "same"}, {"value": "different"})

        assert await asyncio.gather(store.aput(("test",), "key", {"value": 1}),
                                    store.aput(("test",), "key", {"value": 2})) == [None, None]
        assert (await store.aget(("test",), "key")).value == {"value": 2}
        first, second = await asyncio.gather(store.asearch(("test",), filter={"value": 2}),
                                             store.asearch(("test",), filter={"value": 2}))
        assert first == second and [i.value for i in first] == [{"value": 2}]

    run_async(run())


# --- vector search with a configured embedding function ----------------------------------------------------


def test_vector_insert_with_auto_embedding(vstore: EngramStore) -> None:
    for key, value in [("doc1", {"text": "short text"}), ("doc2", {"text": "longer text document"}),
                       ("doc3", {"text": "longest text document here"}),
                       ("doc4", {"description": "text in description field"}),
                       ("doc5", {"content": "text in content field"}), ("doc6", {"body": "text in body field"})]:
        vstore.put(("test",), key, value)
    keys = [r.key for r in vstore.search(("test",), query="long text")]
    assert "doc2" in keys and "doc3" in keys


def test_vector_update_with_embedding_and_an_unindexed_put(vstore: EngramStore) -> None:
    vstore.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    vstore.put(("test",), "doc2", {"text": "something about dogs"})
    vstore.put(("test",), "doc3", {"text": "text about birds"})
    initial = vstore.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1" and initial[0].score is not None
    initial_score = initial[0].score

    vstore.put(("test",), "doc1", {"text": "new text about dogs"})
    after = next(r.score for r in vstore.search(("test",), query="Zany Xerxes") if r.key == "doc1")
    assert after is not None and after < initial_score
    for r in vstore.search(("test",), query="new text about dogs"):
        if r.key == "doc1":
            assert r.score is not None and r.score > after

    vstore.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    assert not any(r.key == "doc4" for r in vstore.search(("test",), query="new text about dogs", limit=3))


def test_vector_search_with_filters(vstore: EngramStore) -> None:
    for key, value in [("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
                       ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
                       ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
                       ("doc4", {"text": "blue car", "color": "blue", "score": 3.5})]:
        vstore.put(("test",), key, value)

    results = vstore.search(("test",), query="apple", filter={"color": "red"})
    assert (len(results), results[0].key) == (2, "doc1")
    results = vstore.search(("test",), query="car", filter={"color": "red"})
    assert (len(results), results[0].key) == (2, "doc2")
    results = vstore.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
    assert (len(results), results[0].key) == (3, "doc4")
    results = vstore.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]


def test_async_vector_search_concurrent_with_filters(vstore: EngramStore) -> None:
    """Scaled down from 50 documents to 10: each delete runs a full deletion job in this test's server."""
    colors, things, scores = ["red", "blue", "green", "yellow", "purple"], ["apple", "car", "house", "book", "phone"], \
        [3.0, 3.5, 4.0, 4.5, 5.0]
    docs = [(f"doc{i}", {"text": f"{colors[i % 5]} {things[i % 5]}", "color": colors[i % 5],
                         "score": scores[i % 5], "index": i}) for i in range(10)]

    async def run() -> list[list[Any]]:
        await asyncio.gather(*[vstore.aput(("test",), k, v) for k, v in docs],
                             *[vstore.adelete(("test",), k) for k, _ in docs],
                             *[vstore.aput(("test",), k, v) for k, v in docs])
        return await asyncio.gather(*[vstore.asearch(("test",), query=q, filter=f) for q, f in queries])

    queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}), ("car", {"color": "blue"}), ("phone", {"score": {"$gt": 4.99}}),
        ("book", {"score": {"$lte": 3.5}}), ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
        ("house", {"index": {"$gt": 5}}), ("phone", {"index": {"$lte": 4}})]
    for results, (query, flt) in zip(run_async(run()), queries, strict=True):
        assert results, f"no results for {query} {flt}"
        for r in results:
            assert all(_holds(r.value[k], v) for k, v in flt.items())


def _holds(value: Any, condition: Any) -> bool:
    if not isinstance(condition, dict):
        return bool(value == condition)
    ops = {"$gt": value.__gt__, "$gte": value.__ge__, "$lt": value.__lt__, "$lte": value.__le__}
    return all(ops[op](bound) for op, bound in condition.items())


def test_vector_search_pagination_and_edge_cases(vstore: EngramStore) -> None:
    for i in range(5):
        vstore.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = vstore.search(("test",), query="test", limit=2)
    page2 = vstore.search(("test",), query="test", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2 and page1[0].key != page2[0].key
    assert len(vstore.search(("test",), query="test", limit=10)) == 5
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(vstore.search(("test",), query=query)) == 5


def test_embed_with_store_and_operation_level_fields(make_store: Any) -> None:
    embed = LetterEmbeddings()
    store = make_store(index={"dims": 64, "embed": embed, "fields": ["key0", "key1", "key3"]})

    async def run() -> None:
        await store.aput(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
        await store.aput(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})
        results = await store.asearch(("test",), query="xxx")
        assert len(results) == 2 and results[0].key != results[1].key
        top = results[0].score
        assert top is not None and results[1].score == pytest.approx(top, abs=1e-5)
        results = await store.asearch(("test",), query="uuu")
        assert results[0].key == "doc2" and results[0].score > results[1].score
        results = await store.asearch(("test",), query="www")  # key2 is not indexed
        assert all(r.score < top for r in results)

        others = make_store(index={"dims": 64, "embed": embed, "fields": ["key17"]})
        await others.aput(("test2",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc"}, index=["key0", "key1"])
        await others.aput(("test2",), "doc4", {"key0": "eee", "key1": "bbb", "key3": "ggg"}, index=["key1", "key3"])
        results = await others.asearch(("test2",), query="aaa")
        assert results[0].key == "doc3" and results[0].score > results[1].score
        results = await others.asearch(("test2",), query="bbb")
        assert results[0].score == pytest.approx(results[1].score)
        await others.aput(("test2",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
        results = await others.asearch(("test2",), query="hhh")
        assert len(results) == 3 and next(r for r in results if r.key == "doc5").score is None

    run_async(run())


def test_non_ascii(vstore: EngramStore) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for n, text in enumerate(texts, start=1):
        vstore.put(("user_123", "memories"), str(n), {"text": text})
    for n, text in enumerate(texts, start=1):
        assert vstore.search(("user_123", "memories"), query=text)[0].key == str(n)
