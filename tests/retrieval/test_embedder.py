"""The embedder: all-MiniLM-L6-v2 on CPU, one instance per process, batched, offline, query LRU, tokenizer counts."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from memory.embedder import DIMENSIONS, MiniLMEmbedder, TorchMiniLM, get_embedder
from memory.embedder_onnx import CHECK_SENTENCES, OnnxMiniLM, export_query_graph, onnx_path, query_graph_path


def test_it_is_one_instance_per_process_loaded_offline():
    embedder = get_embedder()

    assert embedder is get_embedder()
    assert embedder.name == "all-MiniLM-L6-v2"
    embedder.embed_query("warm up")
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_batched_vectors_are_normalised_384_d_and_match_single_calls():
    embedder = get_embedder()
    texts = ["Prefers aisle seats", "Lives in Lisbon", "Order ORD-58213 was delivered"]

    batch = embedder.embed(texts, batch_size=2)

    assert len(batch) == 3 and all(len(v) == DIMENSIONS for v in batch)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-4) for v in batch)
    single = embedder.embed([texts[1]])[0]
    assert max(abs(a - b) for a, b in zip(single, batch[1], strict=True)) < 1e-4


def test_query_embeddings_are_cached_in_a_bounded_lru():
    embedder = MiniLMEmbedder(query_cache_size=2)
    embedder._runtime = get_embedder().runtime  # share the loaded weights

    first = embedder.embed_query("aisle")
    assert embedder.embed_query("aisle") is first  # served from the cache
    embedder.embed_query("window")
    embedder.embed_query("aisle")  # refreshes "aisle"
    embedder.embed_query("middle")  # evicts the least recently used: "window"

    assert list(embedder._cache) == ["aisle", "middle"]
    embedder.clear_query_cache()
    assert embedder.embed_query("aisle") is not first


def test_it_counts_tokens_with_the_models_tokenizer_not_words():
    embedder = get_embedder()

    assert embedder.count_tokens("Prefers aisle seats") == 3
    # WordPiece splits identifiers: far more tokens than the two words a whitespace count would see.
    assert embedder.count_tokens("ORD-58213 eu-west-3") > 6
    assert embedder.count_tokens("") == 0


@pytest.fixture(scope="module")
def torch_runtime():
    return TorchMiniLM()


def test_the_onnx_export_is_in_place_and_serves_by_default():
    assert onnx_path().exists(), "make install exports the ONNX graph (python -m memory.embedder_onnx)"
    assert get_embedder().runtime.runtime == "onnx"


def test_onnx_vectors_match_pytorch_within_1e_3_cosine(torch_runtime):
    texts = ["Prefers aisle seats on flights", "I like sitting by the corridor on planes", "ORD-58213 eu-west-3",
             "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", "", "word " * 400]

    onnx = np.array(get_embedder().embed(texts))
    reference = torch_runtime.embed(texts)

    assert np.min(np.sum(onnx * reference, axis=1)) > 1 - 1e-3


def test_queries_are_embedded_by_the_query_graph_within_1e_3_cosine_of_the_stored_vectors():
    assert query_graph_path().exists(), "make install builds the query graph (python -m memory.embedder_onnx)"
    runtime = get_embedder().runtime
    assert runtime.query_graph == query_graph_path()
    queries = ["Where did Caroline move from 4 years ago?", "aisle", "?", "ORD-58213 eu-west-3", "word " * 400,
               "Wann hat Melanie zuletzt gemalt?", "vegetarian dinner options near the office next week"]

    stored = np.array(runtime.embed(queries))  # what a record with this text would store
    asked = np.array([runtime.embed_query(q) for q in queries])

    assert np.min(np.sum(stored * asked, axis=1)) > 1 - 1e-3
    assert not np.array_equal(stored, asked)  # the 8-bit graph answered, not the float one


def test_a_query_graph_that_disagrees_with_the_float_graph_is_not_kept(tmp_path):
    target = tmp_path / "query.onnx"

    assert export_query_graph(target=target, min_cosine=1.0) is None  # no quantised graph is that close
    assert list(tmp_path.iterdir()) == []  # no partial file left behind
    # Without a query graph, queries use the float graph: the same vector a stored record gets.
    plain = OnnxMiniLM(onnx_path(), query_graph=target)
    assert plain.embed_query(CHECK_SENTENCES[0]).tolist() == plain.embed([CHECK_SENTENCES[0]])[0].tolist()


def test_onnx_and_pytorch_count_the_same_tokens(torch_runtime):
    for text in ["Prefers aisle seats", "ORD-58213 eu-west-3", "naïve café – ünïcode", "word " * 600]:
        assert get_embedder().count_tokens(text) == torch_runtime.count_tokens(text)
