"""A body sent with Transfer-Encoding: chunked (no Content-Length) is read in full — under gunicorn, which
`serve` runs — and the usual size limit still applies to it."""

from __future__ import annotations

import http.client
import json

import pytest

from memory.models import MemoryRecord
from tests.conftest import memory_body

pytestmark = pytest.mark.worker


def post_chunked(port: int, path: str, headers: dict[str, str], body: bytes, piece: int = 7) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    chunks = (body[i:i + piece] for i in range(0, len(body), piece))  # an iterator: http.client chunks it
    conn.request("POST", path, body=chunks, headers={**headers, "Content-Type": "application/json"},
                 encode_chunked=True)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_a_chunked_body_is_read_over_a_real_socket(served, make_agent, tenant):
    agent = make_agent(tenant, "usr_owner")
    server = served()
    headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token}

    status, body = post_chunked(server.port, "/api/v1/memories", headers, json.dumps(memory_body()).encode())

    assert status == 201, body
    assert MemoryRecord.objects.get(pk=body["memory_id"]).field == "seat_preference"


def test_a_chunked_body_over_the_limit_is_refused(served, make_agent, tenant):
    agent = make_agent(tenant, "usr_owner")
    server = served({"ENGRAM_MAX_BODY_BYTES": "2000"})
    headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token}

    status, body = post_chunked(server.port, "/api/v1/memories", headers,
                                json.dumps(memory_body(text="x" * 3000)).encode(), piece=512)

    assert status == 400 and body["code"] == "payload_too_large"
    assert MemoryRecord.objects.count() == 0
