"""How the evaluation talks to Engram: the v1 HTTP API, in process or over the network.

In process, requests go through Django's test ``Client``: the real URLconf, middleware,
authentication, views, services and selectors, on the real database and model. ``--via-api URL``
sends the same requests to a running server with urllib. Either way the evaluation only ever sees
what an agent would see: status codes and JSON bodies.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

API = "/api/v1"


@dataclass
class Response:
    status: int
    body: Any

    @property
    def code(self) -> str:
        return self.body.get("code", "") if isinstance(self.body, dict) else ""

    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False, default=str)


class Transport(Protocol):
    def request(self, method: str, path: str, *, key: str, token: str | None, body: Any = None,
                params: dict[str, Any] | None = None) -> Response: ...


class InProcessTransport:
    """Django's test Client: a real request/response cycle without a socket."""

    def __init__(self) -> None:
        from django.test import Client

        self._client = Client()

    def request(self, method: str, path: str, *, key: str, token: str | None, body: Any = None,
                params: dict[str, Any] | None = None) -> Response:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        if token:
            headers["HTTP_X_ENGRAM_PRINCIPAL"] = token
        url = API + path + (("?" + urlencode(params)) if params else "")
        call = getattr(self._client, method.lower())
        if body is None:
            response = call(url, **headers)
        else:
            response = call(url, data=json.dumps(body), content_type="application/json", **headers)
        content = response.content.decode() if response.content else ""
        try:
            parsed = json.loads(content) if content else None
        except ValueError:
            parsed = {"raw": content[:500]}
        return Response(status=response.status_code, body=parsed)


class HttpTransport:
    """A running server (``--via-api URL``)."""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, *, key: str, token: str | None, body: Any = None,
                params: dict[str, Any] | None = None) -> Response:
        url = self.base + API + path + (("?" + urlencode(params)) if params else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method.upper())
        req.add_header("Authorization", f"Bearer {key}")
        req.add_header("Accept", "application/json")
        if token:
            req.add_header("X-Engram-Principal", token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - operator-given URL
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = {"raw": raw[:500].decode(errors="replace")}
        return Response(status=status, body=parsed)


@dataclass
class Principal:
    """One agent key + one principal token: what an agent holds for one subject."""

    name: str  # logical name in the scenario, e.g. "travel/a"
    subject_external_id: str
    key: str
    token: str | None
    transport: Transport

    def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Response:
        return self.transport.request(method, path, key=self.key, token=self.token, body=body, params=params)

    def get(self, path: str, **params: Any) -> Response:
        return self.call("GET", path, params=params or None)

    def post(self, path: str, body: Any) -> Response:
        return self.call("POST", path, body=body)

    def delete(self, path: str) -> Response:
        return self.call("DELETE", path)
