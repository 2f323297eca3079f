"""Hostile form input in a real Chromium, with the real session and CSRF token: a person's page is altered
so that a checkbox of the bulk forms carries a NUL character (what a crafted request would send). The
answer is a readable page naming the field and saying nothing changed, never a server error, and nothing
is deleted, approved or rejected."""

from __future__ import annotations

from typing import Any

import pytest

from memory.identity.services import user_create
from memory.models import Candidate, MemoryRecord
from tests.conftest import axe_violations, login, memory_body
from tests.review.conftest import in_review

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def with_nul_in(page: Any, selector: str) -> None:
    """Give the first checkbox matching ``selector`` the value "<its value>\\0b" and tick it."""
    page.eval_on_selector(selector, "box => { box.value = box.value + '\\u0000b'; box.checked = true; }")


def test_a_nul_in_the_bulk_delete_form_gets_a_page_that_says_so_and_deletes_nothing(live_server, page, agent,
                                                                                      tenant: Any) -> None:
    user_create(tenant=tenant, username="alice", password="alice-pass-123", subject_external_id="usr_owner")
    seat = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    login(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/me/")
    with_nul_in(page, f"#row-{seat} input[name=ids]")
    with page.expect_navigation():
        page.click("#delete-selected")

    response_text = page.locator("main").inner_text()
    assert page.title().startswith("Not accepted")
    assert "The form field “ids” contains a NUL character (\\u0000), which cannot be stored." in response_text
    assert "Nothing was changed." in response_text
    assert page.locator("[role=alert]").count() == 1
    assert axe_violations(page) == []
    assert MemoryRecord.objects.get(pk=seat).status == "active"

    page.go_back()  # the person can carry on: the list is as it was
    assert page.locator(f"#row-{seat}").is_visible()


def test_a_nul_in_the_review_queues_bulk_form_approves_and_rejects_nothing(live_server, page, agent,
                                                                           tenant: Any) -> None:
    user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)
    seat = in_review(agent, value="aisle", text="Prefers aisle seats", event_id="evt_seat",
                     said="Put me on the aisle.")
    meal = in_review(agent, field="meal", value="vegetarian", text="Orders vegetarian meals", event_id="evt_meal",
                     said="No meat for me.")

    login(page, live_server.url, "rita", "rita-pass-123")
    page.goto(f"{live_server.url}/review/")
    page.check(f"#item-candidate-{meal.pk} input[name=ids]")
    with_nul_in(page, f"#item-candidate-{seat.pk} input[name=ids]")
    with page.expect_navigation():
        page.get_by_role("button", name="Approve selected").click()

    assert "The form field “ids” contains a NUL character" in page.locator("[role=alert]").inner_text()
    assert "Nothing was changed." in page.locator("main").inner_text()
    assert sorted(Candidate.objects.filter(pk__in=[seat.pk, meal.pk]).values_list("status", flat=True)) == [
        "review", "review"]
