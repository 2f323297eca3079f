"""The review queue worked from the keyboard alone: next/previous item, approve, reject with the reason."""

from __future__ import annotations

import pytest

from memory.identity.services import user_create
from memory.models import Candidate
from tests.conftest import login
from tests.review.conftest import in_review

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def focused(page) -> str:
    return page.evaluate("document.activeElement.id || document.activeElement.name || ''")


def test_a_reviewer_works_the_queue_with_the_keyboard(live_server, page, agent, tenant):
    user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)
    seat = in_review(agent, value="aisle", text="Prefers aisle seats", event_id="evt_seat")
    meal = in_review(agent, field="meal", value="vegetarian", text="Orders vegetarian meals", event_id="evt_meal")
    hobby = in_review(agent, namespace=["user"], field="hobby", value="golf", text="Plays golf", kind="fact",
                      event_id="evt_hobby")

    login(page, live_server.url, "rita", "rita-pass-123")
    page.goto(f"{live_server.url}/review/")
    help_text = page.locator("#keyboard-help").inner_text()
    assert "Keyboard" in help_text
    page.locator("#keyboard-help summary").click()
    assert "next item" in page.locator("#keyboard-help").inner_text()

    page.keyboard.press("j")
    assert focused(page) == f"item-candidate-{seat.pk}"
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert focused(page) == f"item-candidate-{hobby.pk}"
    page.keyboard.press("k")
    page.keyboard.press("k")
    assert focused(page) == f"item-candidate-{seat.pk}"

    page.keyboard.press("a")  # approve the focused item
    page.locator(f"#item-candidate-{seat.pk} .decided").wait_for()
    assert focused(page) == f"item-candidate-{seat.pk}"  # the focus stays on the decided item

    page.keyboard.press("j")
    page.keyboard.press("r")  # reject: the focus moves to the reason
    assert focused(page) == "reason"
    page.keyboard.type("says nothing about the user's meals")
    page.keyboard.press("Enter")
    page.locator(f"#item-candidate-{meal.pk} .decided").wait_for()
    assert focused(page) == f"item-candidate-{meal.pk}"

    page.keyboard.press("j")
    page.keyboard.press("r")
    page.keyboard.press("Escape")  # back to the item without rejecting
    assert focused(page) == f"item-candidate-{hobby.pk}"

    statuses = dict(Candidate.objects.values_list("pk", "status"))
    assert statuses == {seat.pk: "approved", meal.pk: "rejected", hobby.pk: "review"}
    assert Candidate.objects.get(pk=meal.pk).reasons[-1] == {"code": "rejected_by_reviewer",
                                                             "detail": "says nothing about the user's meals"}
