"""The retrieval inspector in a real Chromium: from the navigation to one retrieval's candidates."""

from __future__ import annotations

import pytest

from memory.identity.services import user_create
from tests.conftest import login, save_screenshot
from tests.retrieval.conftest import remember, retrieve, sync_tasks  # noqa: F401 - fixtures used below

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_finds_why_a_memory_was_or_was_not_served(live_server, page, agent, remember, tenant,  # noqa: F811 - the imported fixture
                                                             other_tenant):
    user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)
    user_create(tenant=other_tenant, username="gus", password="gus-pass-123", reviewer=True)
    seat = remember(agent, "Prefers aisle seats on flights", namespace=["user", "travel_preferences"],
                    field="seat", value="aisle")
    for field, text in (("hotel", "Likes hotels with a gym"), ("meal", "Orders vegetarian meals on long flights"),
                        ("airline", "Flies TAP whenever possible"), ("home", "Lives in Lisbon")):
        remember(agent, text, namespace=["user", "travel_preferences"], field=field)
    retrieve(agent, "Which airport lounge is closest?", limit=3)
    retrieval_id = retrieve(agent, "I like sitting by the corridor on planes", limit=3, budget_tokens=20)[
        "retrieval_id"]

    login(page, live_server.url, "rita", "rita-pass-123")
    page.get_by_role("link", name="Retrievals").click()
    page.locator("#subjects").get_by_role("link", name="usr_owner").click()
    page.locator("#retrievals").get_by_role("link", name="I like sitting by the corridor on planes").click()
    page.wait_for_url(f"**/{retrieval_id}/")

    assert page.locator("#query").inner_text() == "I like sitting by the corridor on planes"
    first = page.locator("tr.candidate").first
    assert first.get_attribute("data-memory-id") == seat and "kept" in first.locator(".outcome").inner_text()
    outcomes = page.locator("tr.candidate .outcome").all_inner_texts()
    assert any("kept" not in o for o in outcomes)  # and the others show why they were dropped
    assert "of 20 tokens" in page.locator("#budget").inner_text()
    save_screenshot(page, "retrieval-inspector.png", full_page=True)

    page.context.clear_cookies()
    login(page, live_server.url, "gus", "gus-pass-123")
    assert page.goto(f"{live_server.url}/review/retrievals/{retrieval_id}/").status == 404
    page.goto(f"{live_server.url}/review/retrievals/")
    assert "usr_owner" not in page.content()
