"""A retrieve's query embedding, started while its request is still being authenticated and throttled.

Authentication (the key's query), the throttle's upsert and DRF's own set-up take a few milliseconds of database
round trips before a retrieve's view runs, and the query embedding takes a few more on a core that is idle meanwhile.
So the retrieve view hands the body's query to the embedder's prefetch (memory/embedder.py) before authenticating;
the pipeline's ``embed_query`` then finds the vector computed, or waits for the rest of it.

Model work before authentication must not be something anyone can ask for: a prefetch starts only for an agent key
that this process authenticated in the last KEY_MEMORY_SECONDS and that is not being throttled, and never for a query
that looks like a secret (which the retrieve refuses before embedding). A key that fails authentication is forgotten
at once; a revoked key costs at most one prefetch per process. Nothing of a key is kept but a digest, in memory.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict

from rest_framework.request import Request

from memory.embedder import get_embedder
from memory.policy.secrets import scan_text

KEY_MEMORY_SECONDS = 300.0
KEYS_REMEMBERED = 1024
MAX_QUERY_CHARS = 2000  # the retrieve's limit (its serializer reads it here): a longer query is never embedded

_lock = threading.Lock()
_keys: OrderedDict[bytes, tuple[int, float]] = OrderedDict()  # digest -> (key id, remembered until)
_held: dict[int, float] = {}  # key id -> throttled until


def _digest(raw_key: str) -> bytes:
    return hashlib.blake2b(raw_key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def bearer_key(request: Request) -> str | None:
    """The agent key of ``Authorization: Bearer <key>``, stripped; None when the header is missing or malformed."""
    scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return raw.strip() or None


def remember_key(raw_key: str, key_id: int) -> None:
    """``raw_key`` authenticated as ``key_id`` just now."""
    digest = _digest(raw_key)
    with _lock:
        _keys[digest] = (key_id, time.monotonic() + KEY_MEMORY_SECONDS)
        _keys.move_to_end(digest)
        while len(_keys) > KEYS_REMEMBERED:
            _keys.popitem(last=False)


def forget_key(raw_key: str) -> None:
    with _lock:
        _keys.pop(_digest(raw_key), None)


def hold_key(key_id: int, seconds: float) -> None:
    """The key was throttled: no prefetch for it until it may be served again."""
    with _lock:
        _held[key_id] = time.monotonic() + max(seconds, 1.0)
        if len(_held) > KEYS_REMEMBERED:  # expired holds go; they are only an optimisation
            now = time.monotonic()
            for key_id_held in [k for k, until in _held.items() if until <= now]:
                del _held[key_id_held]


def _trusted(raw_key: str) -> bool:
    now = time.monotonic()
    with _lock:
        known = _keys.get(_digest(raw_key))
        if known is None or known[1] <= now:
            return False
        return _held.get(known[0], 0.0) <= now


def _query(request: Request) -> str | None:
    if not request.content_type.startswith("application/json"):
        return None
    try:
        # Django keeps the body it read, and DRF parses it from there later: nothing is read twice from the socket.
        body = json.loads(request._request.body)
    except Exception:  # any fault in the body is the view's to report, in its own words
        return None
    query = body.get("query") if isinstance(body, dict) else None
    if not isinstance(query, str):
        return None
    query = query.strip()  # as the serializer trims it, so that the pipeline asks for the same text
    return query if 0 < len(query) <= MAX_QUERY_CHARS else None


def prefetch_query_vector(request: Request) -> None:
    """Start embedding the request's query if its key is trusted and the query may be embedded (see above)."""
    raw_key = bearer_key(request)
    if raw_key is None or not _trusted(raw_key):
        return
    query = _query(request)
    if query is None or scan_text(query):
        return
    get_embedder().prefetch_query(query)
