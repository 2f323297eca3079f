"""Batch writes served by web processes of their own, at a lower CPU priority than the ones that serve reads.

A web process serving a 500-item batch holds its interpreter lock for most of a quarter of a second (parsing,
validating, building rows, rendering 500 results), and a retrieve answered by a thread of the same process waits
for it every time it comes back from the database or the model. Lowering the batch thread's priority cannot
help with a lock. So ``manage.py serve`` starts a second gunicorn, the *bulk pool*, on a Unix socket only it and
the main pool know, its processes at ``ENGRAM_WEB_BULK_NICE``. The main pool hands every batch endpoint's request
to it, whole, before Django sees it:

- ``forwards_bulk_requests`` (main pool, when ``ENGRAM_BULK_SOCKET`` names the socket): the request's method,
  path, headers and body go to the bulk pool, with the client's address and scheme, and its answer comes back
  unchanged. Reading and writing sockets releases the interpreter lock, so the main pool's threads stay free.
  If the bulk pool cannot be reached the request is served here, as without it; if it fails after taking the
  request, the answer is 503 (the batch may or may not have been written; a retry with the same ids writes
  nothing twice).
- ``serves_forwarded_requests`` (bulk pool, ``ENGRAM_WEB_POOL=bulk``): the client's address and scheme are
  restored from the main pool's headers, so per-address limits and the trusted-proxy rules see the client, and
  the answer says ``X-Engram-Pool: bulk``.

Behind a proxy of their own, operators can route the same paths to a bulk pool's TCP address instead.
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.urls import Resolver404, get_resolver, resolve

from config.chunked import WSGIApp

logger = logging.getLogger("engram.bulk_pool")

BULK_ROUTES = frozenset({"memories-batch", "documents-batch", "thread-events-batch"})
SOCKET_ENV = "ENGRAM_BULK_SOCKET"
POOL_ENV = "ENGRAM_WEB_POOL"
PEER_HEADER, SCHEME_HEADER, POOL_HEADER = "X-Engram-Peer", "X-Engram-Scheme", "X-Engram-Pool"
# Hop-by-hop headers (RFC 9110, 7.6.1) belong to one connection; gunicorn frames each side itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
                        "upgrade"})
# Set again by the main pool's gunicorn on the answer it sends.
FRONT_SERVER_HEADERS = frozenset({"date", "server"})
TIMEOUT_SECONDS = 120.0  # gunicorn's own --timeout for a request


def is_bulk_pool() -> bool:
    return os.environ.get(POOL_ENV) == "bulk"


def socket_path(port: int, base: Path) -> Path:
    """Under var/run/ of the checkout, or a private temporary directory when that path is too long for a Unix
    socket (108 bytes on Linux)."""
    path = base / "var" / "run" / f"bulk-{port}.sock"
    if len(str(path)) > 100:
        path = Path(tempfile.mkdtemp(prefix="engram-")) / f"bulk-{port}.sock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)  # gunicorn makes the socket writable by anyone; its directory is what keeps it ours
    path.unlink(missing_ok=True)  # left by a server that was killed
    return path


def is_bulk_request(environ: dict[str, Any]) -> bool:
    if environ.get("REQUEST_METHOD") != "POST":
        return False
    try:
        return resolve(environ.get("PATH_INFO", "")).url_name in BULK_ROUTES
    except Resolver404:
        return False


def warm_up_bulk() -> None:
    """Import what a batch needs before the first one arrives (the URL tree, the views and everything they import):
    a bulk process's first batch would otherwise pay for it."""
    get_resolver().url_patterns  # noqa: B018 - loads the whole tree
    for name in BULK_ROUTES:
        get_resolver().reverse_dict.getlist(name)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT_SECONDS)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _request_headers(environ: dict[str, Any], length: int) -> dict[str, str]:
    headers = {key[5:].replace("_", "-").title(): str(value) for key, value in environ.items()
               if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in HOP_BY_HOP}
    for own in (PEER_HEADER, SCHEME_HEADER, POOL_HEADER):
        headers.pop(own, None)  # only this process sets these
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = environ["CONTENT_TYPE"]
    headers["Content-Length"] = str(length)
    headers[PEER_HEADER] = environ.get("REMOTE_ADDR", "")
    headers[SCHEME_HEADER] = environ.get("wsgi.url_scheme", "http")
    return headers


def _unavailable(start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = json.dumps({"code": "batch_interrupted", "detail": "The process serving the batch stopped before it "
                       "answered: the batch was written whole or not at all. Retry it; items already written are "
                       "matched by their ids."}).encode()
    start_response("503 Service Unavailable", [("Content-Type", "application/json"),
                                               ("Content-Length", str(len(body))), ("Retry-After", "1")])
    return [body]


def forwards_bulk_requests(app: WSGIApp) -> WSGIApp:
    """The main pool's WSGI application: batch endpoints go to the bulk pool when ``ENGRAM_BULK_SOCKET`` is set."""
    path = os.environ.get(SOCKET_ENV, "")
    if not path or is_bulk_pool():  # the bulk pool serves what it is given, never forwards it again
        return app

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if not is_bulk_request(environ) or length > (settings.DATA_UPLOAD_MAX_MEMORY_SIZE or length):
            return app(environ, start_response)  # an oversized body is refused here, as anywhere
        body = environ["wsgi.input"].read(length) if length else b""
        target = environ.get("RAW_URI") or environ.get("PATH_INFO", "/")
        connection = _UnixConnection(path)
        try:
            connection.connect()
        except OSError:
            logger.warning("the bulk pool at %s cannot be reached; serving the batch here", path)
            environ["wsgi.input"] = io.BytesIO(body)
            return app(environ, start_response)
        try:
            connection.request(environ["REQUEST_METHOD"], target, body=body,
                               headers=_request_headers(environ, len(body)))
            response = connection.getresponse()
            content = response.read()
        except (OSError, http.client.HTTPException):
            logger.exception("the bulk pool failed on a batch")
            return _unavailable(start_response)
        finally:
            connection.close()
        headers = [(name, value) for name, value in response.getheaders()
                   if name.lower() not in HOP_BY_HOP | FRONT_SERVER_HEADERS]
        start_response(f"{response.status} {response.reason}", headers)
        return [content]

    return wrapped


def serves_forwarded_requests(app: WSGIApp) -> WSGIApp:
    """The bulk pool's WSGI application: every request came from the main pool over the private socket."""
    if not is_bulk_pool():
        return app

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["REMOTE_ADDR"] = environ.pop("HTTP_X_ENGRAM_PEER", "")
        scheme = environ.pop("HTTP_X_ENGRAM_SCHEME", "http")
        environ["wsgi.url_scheme"] = scheme if scheme in ("http", "https") else "http"

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, (POOL_HEADER, "bulk")], exc_info)

        return app(environ, start)

    return wrapped
