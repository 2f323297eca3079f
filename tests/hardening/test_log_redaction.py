"""Secrets a client puts in a URL stay out of the server's logs: the served process (`manage.py serve`:
gunicorn's access log and Django's request warnings, both on the process's output) is sent requests with
secrets in paths and query strings, and its log file is read."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from memory.policy.secrets import redact_secrets
from tests.conftest import wait_for
from tests.test_serve import ROOT, free_port, health

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
SLACK_TOKEN = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
STRIPE_KEY = "sk_live_" + "a1b2c3d4e5f6g7h8i9j0k1l2"
PASSWORD = "hunter2Zq9"
CARD = "4111 1111 1111 1111"
SECRETS = [GITHUB_TOKEN, AWS_KEY, SLACK_TOKEN, STRIPE_KEY, PASSWORD, CARD]


def paths() -> list[str]:
    """Each secret in a path segment or a query value, plain, URL-encoded and base64-encoded."""
    q = urllib.parse.quote
    b64 = base64.b64encode(GITHUB_TOKEN.encode()).decode()
    return [
        f"/api/v1/workflows/{GITHUB_TOKEN}/checkpoint",
        f"/api/v1/memories?status={AWS_KEY}",
        f"/api/v1/memories?q={q(f'my password is {PASSWORD}')}",
        f"/api/v1/threads/{STRIPE_KEY}/events",
        f"/no/such/page/{SLACK_TOKEN}",
        f"/api/v1/memories?note={q(CARD)}",
        f"/api/v1/workflows/{q(b64, safe='')}/checkpoint",
        f"/me/?q={q(AWS_KEY, safe='')}",
    ]


def get(port: int, path: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def forms(secret: str) -> list[str]:
    return [secret, urllib.parse.quote(secret), urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
            base64.b64encode(secret.encode()).decode()]


@pytest.mark.django_db(transaction=True)
def test_the_served_processs_log_holds_none_of_the_secrets_sent_in_urls(make_agent, tenant, tmp_path: Path):
    agent = make_agent(tenant, "usr_owner")
    log = tmp_path / "server.log"
    port = free_port()
    env = {**os.environ, "ENGRAM_DB_NAME": connection.settings_dict["NAME"], "ENGRAM_WARMUP": "0",
           "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "1", "--queues", "",
             "--bulk-workers", "0"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: health(port), timeout=60)
        headers = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token or ""}
        statuses = [get(port, path, headers) for path in paths()]
        statuses.append(get(port, f"/api/v1/threads/{GITHUB_TOKEN}/events", {}))  # no credentials
        wait_for(lambda: log.read_text(errors="replace").count("[REDACTED]") >= 8, timeout=20)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    text = log.read_text(errors="replace")

    assert statuses[0] == 422 and statuses[-1] == 422  # the secrets were refused, and logged
    assert "Unprocessable" in text and "Not Found" in text
    leaked = [form for secret in SECRETS for form in forms(secret) if form in text]
    assert leaked == [], text


@pytest.mark.parametrize("line", [
    '127.0.0.1 - - [04/Dec/2026:14:11:31 +0000] "GET /api/v1/memories?limit=50&offset=100 HTTP/1.1" 200 5123 "-" '
    '"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"',
    'Not Found: /api/v1/threads/thr_01JZ8QBZ0X2C4V6B8N0M2K4J6H/events/evt_01JZ8QC4V6B8N0M2K4J6H8G0FD',
    "Booting worker with pid: 1234567",
    # A random request id whose digits 8794212154566206 would pass for a card number if they stood alone.
    '127.0.0.1 - - [04/Dec/2026:23:57:23 +0000] "GET /api/v1/memories HTTP/1.1" 429 88 "-" "-" 4ms '
    "request_id=bcae99dde8e444fe8794212154566206",
    "Bad Request: /api/v1/memories/mem_01JZ8Q6W3T0ZB9E1K7M4D2V5XA/history",
])
def test_it_leaves_a_clean_log_line_as_it_is(line):
    assert redact_secrets(line) == line
