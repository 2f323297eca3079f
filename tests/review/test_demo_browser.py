"""The demo `make run` seeds, in a real Chromium: the reviewer's queue has work in it, and approving a
candidate works end to end; Alice's page reads as hers. Takes docs/screenshots/me.png (`make screenshots`)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from memory.models import Candidate, MemoryRecord
from tests.conftest import axe_violations, login, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(tmp_path):
    call_command("seed_demo", "--key-file", str(tmp_path / "key"), stdout=StringIO())


def test_the_seeded_demo_shows_every_review_flow_and_an_approval_works(live_server, page, demo):
    login(page, live_server.url, "reviewer", "engram-reviewer")
    page.goto(f"{live_server.url}/review/")

    assert page.locator('article.item[data-type="candidate"]').count() == 3
    assert page.locator('article.item[data-type="conflict"]').count() == 1
    assert page.locator('[data-tenant="demo"] .count').inner_text() == "4"
    item = page.locator('article.item[data-type="candidate"]').filter(has_text="Frequent traveller")
    assert item.locator(".subject-name").inner_text() == "Alice Martin"
    candidate_id = item.get_attribute("data-id")

    item.locator("button.approve").click()
    page.wait_for_selector(f'#item-candidate-{candidate_id} [data-status="approved"]')

    candidate = Candidate.objects.get(pk=candidate_id)
    assert candidate.status == "approved"
    record = MemoryRecord.objects.get(pk=candidate.result_record_id)
    assert record.status == "active" and record.field == "frequent_flyer"
    page.goto(f"{live_server.url}/review/")
    assert page.locator('article.item[data-type="candidate"]').count() == 2

    page.goto(f"{live_server.url}/review/procedures/")
    assert "refunds" in page.locator("main").inner_text()

    page.context.clear_cookies()
    login(page, live_server.url, "alice", "engram-alice")
    page.goto(f"{live_server.url}/me/")
    text = page.locator("main").inner_text()
    assert "about you" in text and "usr_alice" not in text
    assert page.locator(f"#row-{record.pk} dt", has_text="Lounge access").count() == 1  # approved: hers now
    booking = page.locator("tr.memory-row").filter(has_text="ORD-2026-0042")
    assert booking.locator("dt", has_text="Order id").count() == 1
    assert page.locator("tr.memory-row button.confirm").count() == 1  # the guess served unconfirmed
    assert axe_violations(page) == []
    save_screenshot(page, "me.png")
