"""schemathesis over the OpenAPI schema the project serves at /api/v1/schema: every operation it documents
is called with generated path parameters, query parameters and bodies, authenticated as a real agent,
through the WSGI application. No server error, and no response that contradicts a documented schema.

What it exercises is what the schema documents, so it grows with the schema without edits here:
operations without a documented body get none, undocumented responses are not validated, and as request
bodies, query parameters and response shapes are documented they are generated and checked. Undocumented
error statuses are not failures (``status_code_conformance`` is left out) until the schema lists them.
ENGRAM_SCHEMATHESIS_EXAMPLES sets the examples per operation.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("ENGRAM_SCHEMATHESIS_EXAMPLES", "8"))
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


def openapi_document() -> dict[str, Any]:
    """The schema exactly as GET /api/v1/schema?format=json serves it (rendered, so it is plain JSON)."""
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    with GENERATOR_STATS.silence():
        document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))


schema = schemathesis.openapi.from_dict(openapi_document())


@pytest.fixture
def agent_headers(make_agent, tenant) -> dict[str, str]:
    from memory.knowledge.services import access_domain_create

    access_domain_create(tenant=tenant, name="handbook", subject_external_ids=["usr_owner"])
    agent = make_agent(tenant, "usr_owner", scopes=["read", "write", "propose", "mint"])
    return {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token or ""}


@pytest.fixture
def wsgi_app() -> Any:
    """The project's WSGI application, called in process inside the test's transaction. Like Django's test
    client, it must not close the connection at each request's start and end (that would end the test
    transaction and every request after the first would meet a closed connection)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from config.wsgi import application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield application
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much, HealthCheck.data_too_large])
def test_every_documented_operation(case, agent_headers, wsgi_app):
    response = case.call(app=wsgi_app, headers=agent_headers)

    case.validate_response(response, checks=CHECKS, headers=agent_headers)
