"""schemathesis generates requests from the contract for every operation, aimed at the real objects of the
scope matrix's ``world`` (its ids fill the path parameters, so the calls reach the operations' own code
rather than stopping at a 404), and checks each answer: no server error, a documented status, a body of
the documented schema and content type, the documented response headers, and an error code the
operation lists for that status.

Each call runs in a savepoint that is rolled back, so every example meets the same world. Generated
values hold no NUL character (PostgreSQL's text refuses it; hostile input is another test's subject).
ENGRAM_CONTRACT_EXAMPLES sets the examples per operation.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.openapi import documented_codes
from tests.api.contract import served_schema
from tests.gate.test_scope_matrix import url_values

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("ENGRAM_CONTRACT_EXAMPLES", "6"))
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance,
          response_headers_conformance]


def documented_code(response: Any, case: Any) -> str | None:
    """An error's code must be one its operation lists for that status."""
    if response.status_code < 400:
        return None
    op = served_schema()["paths"][case.operation.path][case.method.lower()]
    code = response.json().get("code")
    listed = documented_codes(op["responses"].get(str(response.status_code), {}))
    return None if code in listed else f"{case.method} {case.path}: {response.status_code} {code!r} not in {listed}"


@pytest.fixture
def wsgi_app() -> Any:
    """The project's WSGI application in process, inside the test's transaction: like Django's test client
    it must not close the connection when a request starts or ends."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from config.wsgi import application

    served_schema()  # fetched first: Django's test client reconnects the handlers below after each request
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield application
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_generated_calls_on_real_objects_get_documented_answers(world, make_agent, tenant, wsgi_app):
    schema = schemathesis.openapi.from_dict(served_schema())
    schema.config.generation.update(allow_x00=False, codec="utf-8")
    agent = make_agent(tenant, "usr_owner", scopes=["read", "write", "propose", "mint"])
    auth = {"Authorization": f"Bearer {agent.key}", "X-Engram-Principal": agent.token or ""}
    ids = {name: str(value) for name, value in url_values(world).items()}
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        names = [p.name for p in operation.path_parameters]
        strategy = operation.as_strategy(path_parameters={n: ids[n] for n in names} or None)

        @given(case=strategy)
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def call(case: Any) -> None:
            with transaction.atomic():
                response = case.call(app=wsgi_app, headers=auth)
                transaction.set_rollback(True)
            case.validate_response(response, checks=CHECKS, headers=auth)
            problem = documented_code(response, case)
            assert problem is None, problem

        try:
            call()
        except (Exception, BaseExceptionGroup) as exc:  # every operation is tried; all failures are reported
            failures.append(f"{operation.label}: {exc!r}"[:3000])

    assert failures == [], "\n\n".join(failures)
