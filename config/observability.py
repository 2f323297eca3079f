"""What an operator's tooling reads from every request: its id and its duration, and ``GET /metrics``.

``RequestTracingMiddleware`` runs first: it takes the request id a trusted proxy sent in ``X-Request-ID``
(well formed only) or makes one, puts it on the log lines the request causes (memory/tracing.py) and on the
response, whose header gunicorn's access line prints; then it times the request for
``engram_http_request_duration_seconds`` under its URL pattern, never its path (a path holds ids).

``metrics_view`` renders every metric of memory/metrics.py. It answers a scraper on the loopback interface
directly, and anyone else only with ``Authorization: Bearer $ENGRAM_METRICS_TOKEN``. A request that came
through a proxy (it carries a forwarding header) is not a loopback request, even when the proxy runs on
this host: the proxy forwards other people's requests.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder

from memory import metrics
from memory.metrics_scrape import scrape_registry
from memory.tracing import new_request_id, set_request_id, valid_request_id

REQUEST_ID_HEADER = "X-Request-ID"
FORWARDING_HEADERS = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP")


def _address(request: HttpRequest) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return None


def _trusted_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    configured = getattr(settings, "ENGRAM_TRUSTED_PROXIES", ())
    if isinstance(configured, str):
        configured = configured.split(",")
    return [ipaddress.ip_network(str(entry).strip(), strict=False) for entry in configured if str(entry).strip()]


def from_trusted_proxy(request: HttpRequest) -> bool:
    """The peer is this host or a proxy named in ENGRAM_TRUSTED_PROXIES (addresses or networks)."""
    address = _address(request)
    if address is None:
        return False
    return address.is_loopback or any(address in network for network in _trusted_networks())


def is_loopback(request: HttpRequest) -> bool:
    address = _address(request)
    return address is not None and address.is_loopback and not any(request.META.get(h) for h in FORWARDING_HEADERS)


def request_id_of(request: HttpRequest) -> str:
    given = request.META.get("HTTP_X_REQUEST_ID", "")
    return given if given and valid_request_id(given) and from_trusted_proxy(request) else new_request_id()


def route_of(request: HttpRequest) -> str:
    match = request.resolver_match
    if match is not None and match.route:
        return str(match.route)
    if request.path.startswith("/" + settings.STATIC_URL.lstrip("/")):
        return metrics.ROUTE_STATIC
    return metrics.ROUTE_UNMATCHED


class RequestTracingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_of(request)
        # Cleared when the response is closed (memory/apps.py): Django logs a 4xx/5xx after this returns.
        set_request_id(request_id)
        started = time.perf_counter()
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        metrics.http_request(route=route_of(request), method=request.method or "", status=response.status_code,
                             seconds=time.perf_counter() - started)
        return response


def _refusal(request: HttpRequest) -> JsonResponse | None:
    if is_loopback(request):
        return None
    token = settings.ENGRAM_METRICS_TOKEN
    if not token:
        return JsonResponse({"code": "forbidden", "detail": "Metrics are served to this host only; set "
                             "ENGRAM_METRICS_TOKEN to scrape from elsewhere."}, status=403)
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    response = JsonResponse({"code": "not_authenticated", "detail": "Give the metrics token: "
                             "Authorization: Bearer <ENGRAM_METRICS_TOKEN>."}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused is not None:
        return refused
    # The format the scraper asks for (Prometheus' Accept header: OpenMetrics or the text format).
    encode, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    response = HttpResponse(encode(scrape_registry()), content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
