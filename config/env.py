"""Strict environment helpers: a bad value raises at start-up instead of misconfiguring silently."""

from __future__ import annotations

import os
import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def _env_number(name: str, default: float, cast: type, kind: str) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {kind}, got {raw!r}") from exc


def env_int(name: str, default: int) -> int:
    return int(_env_number(name, default, int, "an integer"))


def env_float(name: str, default: float) -> float:
    return float(_env_number(name, default, float, "a number"))


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


_RATE = re.compile(r"^\d+/(s|sec|second|m|min|minute|h|hour|d|day)$")


def env_rate(name: str, default: str) -> str | None:
    """A DRF throttle rate such as "6000/min"; empty or "off" turns the limit off (None)."""
    raw = os.environ.get(name, default).strip()
    if raw.lower() in ("", "off", "none"):
        return None
    if not _RATE.match(raw):
        raise ImproperlyConfigured(f"{name} must look like 100/s, 6000/min, 1000/hour or 'off', got {raw!r}")
    return raw


def env_networks(name: str) -> list[str]:
    """Comma-separated IP addresses or CIDR networks ("10.0.0.0/8, 127.0.0.1"), each checked; empty: none."""
    import ipaddress

    networks = []
    for item in env_list(name, []):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name} must list IP addresses or networks, got {item!r}") from exc
    return networks
