"""The login page works in a real browser and lands a person on their home page."""

from __future__ import annotations

import pytest

from memory.identity.services import user_create
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_logs_a_reviewer_in_and_shows_their_queues(live_server, page, tenant):
    user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)

    login(page, live_server.url, "rita", "rita-pass-123")

    assert page.locator("h1").inner_text() == "Welcome, rita"
    assert "You review for" in page.content()


def test_it_refuses_a_wrong_password(live_server, page, tenant):
    user_create(tenant=tenant, username="rita", password="rita-pass-123")

    login(page, live_server.url, "rita", "wrong")

    assert "didn't match" in page.content()
