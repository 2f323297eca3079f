"""Procedures fixtures: a reviewer per tenant and a published org procedure, all through the services."""

from __future__ import annotations

from typing import Any

import pytest

from memory.identity.access import reviewer_of
from memory.identity.services import user_create
from procedures.services import procedure_publish

BODY_V1 = """Refund procedure
1. Look up the order in the billing system.
2. Refunds up to 50 EUR: refund at once and tell the customer.
3. Above 50 EUR: open a ticket for the finance team at https://finance.acme.example/tickets.
"""


@pytest.fixture
def reviewer(tenant: Any) -> Any:
    return user_create(tenant=tenant, username="rita", password="pw-rita", reviewer=True)


@pytest.fixture
def other_reviewer(other_tenant: Any) -> Any:
    return user_create(tenant=other_tenant, username="otto", password="pw-otto", reviewer=True)


@pytest.fixture
def procedure(tenant: Any, reviewer: Any) -> Any:
    """acme's org procedure "refunds", version 1."""
    return procedure_publish(tenant=tenant, name="refunds", body=BODY_V1, reviewer=reviewer_of(reviewer),
                             change_summary="First version").procedure


def propose(agent: Any, body: str, name: str = "refunds", **extra: Any) -> Any:
    return agent.post(f"/api/v1/procedures/{name}/proposals", {"body": body, **extra})


def edited(extra_line: str) -> str:
    return BODY_V1 + extra_line + "\n"
