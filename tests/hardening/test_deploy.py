"""Production settings switched on by the environment: `check --deploy` has no security warning, plain HTTP is
redirected (health excepted, for load balancers), HSTS and secure cookies are sent, and a request a proxy
forwarded as HTTPS counts as secure."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parent.parent.parent
PRODUCTION = {"ENGRAM_PRODUCTION": "1", "ENGRAM_SECRET_KEY": secrets.token_urlsafe(50),
              "ENGRAM_ALLOWED_HOSTS": "engram.example.com", "ENGRAM_BEHIND_PROXY": "1"}


def check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The test run's own DJANGO_ALLOW_ASYNC_UNSAFE (for Playwright) is what check --deploy rightly flags.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_PRODUCTION", "ENGRAM_SSL", "ENGRAM_HSTS",
                                                                      "ENGRAM_SECURE", "DJANGO_ALLOW_ASYNC"))}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


def security_warnings(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if "(security." in line]


def test_check_deploy_has_no_security_warning_with_production_settings():
    result = check_deploy(PRODUCTION)

    assert result.returncode == 0, result.stderr
    assert security_warnings(result) == []


def test_without_them_check_deploy_lists_what_is_missing():
    warnings = " ".join(security_warnings(check_deploy({})))

    for code in ("W004", "W008", "W012", "W016"):  # HSTS, SSL redirect, session and CSRF cookies
        assert code in warnings


def test_production_refuses_to_start_without_a_secret_key():
    env = {**PRODUCTION, "ENGRAM_SECRET_KEY": ""}

    result = check_deploy(env)

    assert result.returncode != 0 and "ENGRAM_SECRET_KEY" in result.stderr


SECURE = {"SECURE_SSL_REDIRECT": True, "SECURE_HSTS_SECONDS": 31_536_000, "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
          "SECURE_HSTS_PRELOAD": True, "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
          "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True}


@pytest.mark.django_db
def test_plain_http_is_redirected_and_https_gets_hsts():
    with override_settings(**SECURE):
        client = Client()
        plain = client.get("/api/v1/memories")
        forwarded = client.get("/api/v1/memories", HTTP_X_FORWARDED_PROTO="https")
        health = client.get("/api/v1/health")
        login = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")

    assert plain.status_code == 301 and plain["Location"].startswith("https://")
    assert forwarded.status_code == 401  # reached the API (no credentials given)
    assert "max-age=31536000" in forwarded["Strict-Transport-Security"]
    assert health.status_code == 200  # load balancers probe over plain HTTP
    assert login.cookies["csrftoken"]["secure"]
