"""The review queue in a real Chromium: a reviewer works through candidates and a conflict."""

from __future__ import annotations

import pytest

from memory.identity.services import user_create
from memory.models import Candidate
from tests.conftest import login, save_screenshot
from tests.consolidation.helpers import state
from tests.review.conftest import in_review, org_conflict

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_approves_edits_rejects_and_resolves_and_the_api_serves_the_result(
        live_server, page, browser, agent, tenant, other_tenant):
    user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)
    user_create(tenant=other_tenant, username="gus", password="gus-pass-123", reviewer=True)
    seat = in_review(agent, value="aisle", text="Prefers aisle seats", event_id="evt_seat",
                     said="Put me on the aisle, my knees can't take the window.")
    meal = in_review(agent, field="meal", value="vegetarian", text="Orders vegetarian meals", event_id="evt_meal",
                     said="No meat for me on the flight, thanks.")
    hobby = in_review(agent, namespace=["user"], field="hobby", value="golf", text="Plays golf", kind="fact",
                      event_id="evt_hobby", said="Ugh, my colleague won't stop talking about golf.")
    conflict = org_conflict(agent)
    said = state(agent, field="airline", value="TAP", text="Flies TAP", event_id="evt_said_airline")
    airline = in_review(agent, field="airline", value="Lufthansa", text="Flies Lufthansa", event_id="evt_airline",
                        said="Lufthansa lounge was nice last time.")

    login(page, live_server.url, "rita", "rita-pass-123")
    page.goto(f"{live_server.url}/review/")
    seat_row = page.locator(f"#item-candidate-{seat.pk}")
    assert "Put me on the aisle, my knees can't take the window." in seat_row.inner_text()
    assert "no_active_record" in seat_row.inner_text()
    assert page.locator('[data-tenant="acme"] .count').inner_text() == "5"
    save_screenshot(page, "review-queue.png", full_page=True)

    seat_row.get_by_role("button", name="Approve").click()
    page.locator(f"#item-candidate-{seat.pk} .decided").wait_for()
    assert "is now the active record" in page.locator(f"#item-candidate-{seat.pk}").inner_text()

    page.locator(f"#item-candidate-{meal.pk}").get_by_role("link", name="Edit and approve").click()
    page.fill("input[name=value]", "vegetarian, no mushrooms")
    page.fill("textarea[name=text]", "Orders vegetarian meals without mushrooms")
    page.get_by_role("button", name="Save and approve").click()
    page.wait_for_url(f"{live_server.url}/review/")
    assert "Edited. Approved" in page.locator(".messages").inner_text()

    hobby_row = page.locator(f"#item-candidate-{hobby.pk}")
    hobby_row.locator("input[name=reason]").fill("about a colleague, not the user")
    hobby_row.get_by_role("button", name="Reject").click()
    page.locator(f"#item-candidate-{hobby.pk} .decided").wait_for()

    page.locator(f"#item-conflict-{conflict.pk}").get_by_role("button", name="Use proposed").click()
    page.locator(f"#item-conflict-{conflict.pk} .decided").wait_for()

    airline_row = page.locator(f"#item-candidate-{airline.pk}")
    assert said in airline_row.inner_text() and "differs_from_active" in airline_row.inner_text()
    airline_row.get_by_role("button", name="Keep current").click()
    page.locator(f"#item-candidate-{airline.pk} .decided").wait_for()

    page.goto(f"{live_server.url}/review/")
    assert page.locator("#empty").is_visible()
    assert dict(Candidate.objects.values_list("pk", "status")) == {
        seat.pk: "approved", meal.pk: "approved", hobby.pk: "rejected", airline.pk: "rejected"}

    # The results through the agents' API.
    active = agent.get("/api/v1/memories", {"status": "active"}).json()["results"]
    facts = {(r["fact"]["field"], r["fact"]["value"], r["source"]["type"], r["confidence"]) for r in active}
    assert facts == {("seat_preference", "aisle", "model_inferred", "confirmed"),
                     ("meal", "vegetarian, no mushrooms", "model_inferred", "confirmed"),
                     ("region", "US", "org_record", "confirmed"),
                     ("airline", "TAP", "explicit_user_statement", "confirmed")}

    # A reviewer of another tenant sees none of it.
    other = browser.new_context()
    other_page = other.new_page()
    login(other_page, live_server.url, "gus", "gus-pass-123")
    other_page.goto(f"{live_server.url}/review/")
    assert other_page.locator("#empty").is_visible()
    assert seat.pk not in other_page.content()
    leftover = in_review(agent, field="pillow", value="firm", text="Wants a firm pillow", event_id="evt_pillow")
    response = other_page.goto(f"{live_server.url}/review/candidates/{leftover.pk}/edit")
    assert response is not None and response.status == 404
    other.close()
