"""Request bodies sent with ``Transfer-Encoding: chunked`` (no Content-Length), read in full.

gunicorn decodes chunked bodies and hands them over as ``wsgi.input``, but Django reads exactly
CONTENT_LENGTH bytes of it — none when the header is absent — so a chunked JSON body arrived empty and a
valid write was refused with 400 "field required". This WSGI wrapper reads such a body (never more than
the configured maximum plus one byte), and gives Django a stream with the length it needs; a body over the
maximum keeps a length over the limit, so the API answers its usual 400 payload_too_large.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def reads_chunked_bodies(app: WSGIApp) -> WSGIApp:
    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
            stream = environ["wsgi.input"]
            body = stream.read(limit + 1) if limit else stream.read()
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return wrapped
