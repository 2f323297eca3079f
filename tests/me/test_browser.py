"""/me/ in a real browser, with a real worker running the deletion job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.deletion.models import DeletionJob
from tests.conftest import login, memory_body

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_person_sees_corrects_deletes_and_exports_and_another_sees_none_of_it(
        live_server, page, alice, bob, agent, outsider, qcluster):
    seat = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    meal = agent.post("/api/v1/memories", memory_body(
        fact={"field": "meal_preference", "value": "vegetarian"}, text="Eats vegetarian meals",
        source={"type": "explicit_user_statement", "event_id": "evt_meal", "text": "No meat for me, thanks"})
    ).json()["memory_id"]
    outsider.post("/api/v1/memories", memory_body(text="Bob likes the front row"))

    login(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/me/")
    seat_row = page.locator(f"#row-{seat}")
    assert "Prefers aisle seats" in seat_row.inner_text()
    assert seat_row.locator(".provenance").inner_text().startswith("You said: “I always take the aisle seat.” — ")
    assert "explicit_user_statement" not in page.locator("main").inner_text()
    assert "Bob likes" not in page.content()

    # Correct the seat.
    seat_row.get_by_role("link", name="Correct").click()
    page.fill("input[name=value]", "window")
    page.fill("input[name=text]", "Prefers window seats")
    page.get_by_role("button", name="Save correction").click()
    page.wait_for_url("**/me/?subject=*")
    assert "Corrected" in page.locator(".messages").inner_text()
    assert "Prefers window seats" in page.content()

    # Delete the meal and watch the job's live status reach completed (htmx polling, a real worker).
    page.locator(f"#row-{meal}").get_by_role("link", name="Delete").click()
    page.click("#confirm-delete")
    page.wait_for_url("**/me/deletions/del_*")
    page.wait_for_function("document.querySelector('#job-status').dataset.status === 'completed'",
                           timeout=90_000)
    assert page.locator("tr.step").count() >= 10
    assert "verification" in page.locator("#deletion-status").inner_text()
    job_url = page.url

    # Export: the download holds the correction and not the deleted meal.
    page.goto(f"{live_server.url}/me/")
    assert "vegetarian" not in page.content()
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(Path(download.value.path()).read_text())
    texts = [r["text"] for r in exported["records"]]
    assert "Prefers window seats" in texts and "Eats vegetarian meals" not in texts
    assert "No meat for me" not in json.dumps(exported)

    # Bob sees none of Alice's data, even by direct URL.
    page.context.clear_cookies()
    login(page, live_server.url, "bob", "bob-pass-123")
    page.goto(f"{live_server.url}/me/")
    assert "Bob likes the front row" in page.content()
    assert "window" not in page.content() and "aisle seats" not in page.content()
    for url in (f"/me/memories/{seat}/", f"/me/memories/{seat}/correct", f"/me/memories/{seat}/delete",
                job_url.replace(live_server.url, "")):
        response = page.goto(f"{live_server.url}{url}")
        assert response.status == 404, url
    assert DeletionJob.objects.get().status == "completed"
