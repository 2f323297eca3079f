"""The address of the client a request came from, trusting X-Forwarded-For only from configured proxies.

Anyone can send ``X-Forwarded-For``; believing it from anyone lets one client appear as many (a new
address per request escapes every per-address limit). So the peer address (``REMOTE_ADDR``) is the
client unless the peer is one of ENGRAM_TRUSTED_PROXIES; then the header is read from the right, past
every trusted proxy, and the first address not a trusted proxy is the client (what each trusted hop
appended; whatever the client put on the left is never reached while an untrusted hop is seen first).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(configured: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in configured)


def _address(value: str) -> Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # "[::1]:8080"
        value = value[1:value.index("]")]
    elif value.count(":") == 1:  # "10.0.0.1:8080"
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def is_trusted_proxy(address: Address | None) -> bool:
    if address is None:
        return False
    return any(address in network for network in _networks(tuple(settings.ENGRAM_TRUSTED_PROXIES)))


def client_address(request: Any) -> Address | None:
    """The client's address, or None when the peer gave none that parses (a test client, a socket)."""
    meta = request.META
    peer = _address(meta.get("REMOTE_ADDR", ""))
    if not is_trusted_proxy(peer):
        return peer
    for hop in reversed(meta.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        address = _address(hop)
        if address is None:
            return peer  # a hop we cannot read: stop at the last proxy we trust
        if not is_trusted_proxy(address):
            return address
        peer = address
    return peer


def client_ip(request: Any) -> str:
    """The client's address as text ("" when unknown): the key of every per-address limit."""
    address = client_address(request)
    return "" if address is None else str(address)


def is_loopback(request: Any) -> bool:
    """Whether the client (not a proxy in front of it) is on this host."""
    address = client_address(request)
    return address is not None and address.is_loopback
