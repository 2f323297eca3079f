"""The embedder as the rest of the code meets it: a failure is one known exception, and a broken model is
not retried on every call.

The model can fail to load (missing or corrupt weights, too little memory) or fail mid-call. Retrieval
must then still answer from its lexical leg and say it did (memory/retrieval/pipeline.py), writes must
still land with their embeddings pending, and a deletion's verification must still run — none of which
should pay a model load attempt (seconds) on every call. So after a failure the guard answers
``EmbedderUnavailable`` at once for ``ENGRAM_EMBEDDER_RETRY_SECONDS``, then tries the model again.
Token counting, which the budget needs on every retrieval, falls back to a conservative estimate.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from memory import metrics

logger = logging.getLogger("engram.embedder")


class EmbedderUnavailable(Exception):
    """The embedding model cannot be used right now."""


def estimate_tokens(text: str) -> int:
    """An upper-leaning token count without the tokenizer: WordPiece averages about four characters a token
    for English, so one token per three characters rarely undercounts (a budget must not be exceeded)."""
    return max(1, math.ceil(len(text) / 3))


class GuardedEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "embedder")
        self.dimensions = getattr(inner, "dimensions", 0)
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        failed_at = self._failed_at
        return failed_at is None or time.monotonic() - failed_at >= settings.ENGRAM_EMBEDDER_RETRY_SECONDS

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self.available:
            raise EmbedderUnavailable("the embedding model failed recently; not retried yet")
        try:
            result = getattr(self.inner, method)(*args, **kwargs)
        except Exception as exc:
            with self._lock:
                first = self._failed_at is None
                self._failed_at = time.monotonic()
            metrics.embedder_degraded(True)
            if first:
                logger.exception("the embedding model failed; lexical search only for %ss",
                                 settings.ENGRAM_EMBEDDER_RETRY_SECONDS)
            raise EmbedderUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if self._failed_at is not None:
            with self._lock:
                self._failed_at = None
            metrics.embedder_degraded(False)
            logger.warning("the embedding model works again")
        return result

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> list[list[float]]:
        return list(self._call("embed", texts, batch_size=batch_size))

    def embed_query(self, text: str) -> list[float]:
        return list(self._call("embed_query", text))

    def prefetch_query(self, text: str) -> None:
        """Start the query's embedding early; nothing while the model is down (its retrieve then answers lexically).
        A prefetch that fails reaches the guard through the ``embed_query`` that waits for it."""
        if self.available:
            self.inner.prefetch_query(text)

    def count_tokens(self, text: str) -> int:
        try:
            return int(self._call("count_tokens", text))
        except EmbedderUnavailable:
            return estimate_tokens(text)

    def clear_query_cache(self) -> None:
        self.inner.clear_query_cache()  # never loads the model

    def __getattr__(self, name: str) -> Any:  # anything else the concrete embedder offers
        return getattr(self.inner, name)
