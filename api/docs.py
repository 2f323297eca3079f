"""The contract: the OpenAPI document and its reference pages (Swagger UI and ReDoc, from
drf-spectacular-sidecar's static files).

Both are served with a Content-Security-Policy that lets the browser load nothing from anywhere but this
host: ReDoc's bundle shows a logo from its vendor's CDN, and a later release of either bundle could
add more. The browser refuses such a load before any request is made. The pages' templates
(templates/api/) are drf-spectacular's with a language and without ReDoc's web fonts.

Scripts run only from this host or from the page's own inline script tags, which carry a nonce drawn anew for
each response: no 'unsafe-inline' for scripts, so markup injected into a page (through a schema text, say)
cannot run. Styles keep 'unsafe-inline': both bundles set style attributes and inject style elements at run
time, and a style cannot run code.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.response import Response

SAME_HOST_ONLY = ("default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; "
                  "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
                  "object-src 'none'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'")


class SchemaView(SpectacularAPIView):
    """The OpenAPI document, public. It is generated from the code, the same for every caller, so each process
    builds it once and serves it from memory: an anonymous caller cannot make the server regenerate it (about a
    second of CPU), and the endpoint needs no rate limit (whose counter would be a database write per call)."""

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []
    _built: dict[str, Any] = {}

    def _get_schema_response(self, request: Request) -> Response:
        if "schema" not in self._built:
            self._built["schema"] = super()._get_schema_response(request).data
        return Response(data=self._built["schema"], headers={
            "Content-Disposition": f'inline; filename="{self._get_filename(request, None)}"'})


def same_host_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        nonce = secrets.token_urlsafe(18)
        request.csp_nonce = nonce  # type: ignore[attr-defined]  # read by the templates as request.csp_nonce
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = SAME_HOST_ONLY.format(nonce=nonce)
        return response

    return wrapped


# Public like the schema they read: no credentials are asked for.
swagger_ui = same_host_only(SpectacularSwaggerView.as_view(url_name="api:schema", template_name="api/swagger_ui.html",
                                                           authentication_classes=[], permission_classes=[],
                                                           throttle_classes=[]))
redoc = same_host_only(SpectacularRedocView.as_view(url_name="api:schema", template_name="api/redoc.html",
                                                    authentication_classes=[], permission_classes=[],
                                                    throttle_classes=[]))
