"""/me/ in a real Chromium with thousands of memories: search, filters, pages (with and without
JavaScript), bulk delete with live statuses, provenance in words, and confirming or denying a guess."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory.consolidation import consolidate
from memory.deletion.models import DeletionJob
from memory.models import Candidate, MemoryRecord
from tests.conftest import login, save_screenshot
from tests.consolidation.helpers import INFERRED, submit
from tests.deletion.helpers import run_job
from tests.me.helpers import item, subject_of, write_many

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

N = 2000


def guess(agent, field: str, value: str, text: str, said: str) -> MemoryRecord:
    candidate = submit(agent, namespace=INFERRED, field=field, value=value, text=text, event_id=f"evt_{field}",
                       said=said)
    assert consolidate(candidate.pk) == "retrievable"
    return MemoryRecord.objects.get(pk=Candidate.objects.get(pk=candidate.pk).result_record_id)


def summary(page) -> str:
    return page.locator("#summary").inner_text()


def expected(**conditions) -> int:
    return sum(1 for i in range(N) if all(check(item(i)) for check in conditions.values()))


@pytest.fixture
def thousands(agent, outsider, alice, bob):
    write_many(subject_of(agent), N)
    write_many(subject_of(outsider), 50, tag="bob")
    curry = guess(agent, "cuisine", "thai", "Likes Thai food", "That green curry was the best thing I ate all week.")
    golf = guess(agent, "hobby", "golf", "Plays golf", "My colleague would not stop talking about golf.")
    return {"curry": curry, "golf": golf}


def test_search_filters_and_pages_over_thousands_of_memories(live_server, page, thousands):
    login(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/me/")
    assert summary(page).startswith(f"{N + 2} memories") and "page 1 of 41" in summary(page)
    assert page.locator("tr.memory-row").count() == 50

    # Search as you type (htmx swaps the results; the address follows).
    page.fill("#id_q", "hotels")
    page.wait_for_function("document.querySelector('#summary').textContent.includes('found')")
    hotels = expected(topic=lambda it: "hotels" in it.text)
    assert summary(page).startswith(f"{hotels} memories found")
    assert "q=hotels" in page.url
    assert all("hotels" in t for t in page.locator("tr.memory-row .text").all_inner_texts())

    page.select_option("#id_source", "system_of_record")
    bookings = expected(topic=lambda it: "hotels" in it.text, source=lambda it: it.source_type == "system_of_record")
    page.wait_for_function(f"document.querySelector('#summary').textContent.startsWith('{bookings} ')")
    booking = page.locator("tr.memory-row .provenance").first.inner_text()
    assert re.fullmatch(r"From the booking system — \d{1,2} \w+ \d{4}", booking), booking

    page.select_option("#id_source", "")
    page.select_option("#id_namespace", "user/travel_preferences")
    page.wait_for_function("document.querySelector('#summary').textContent.startsWith('No ') || "
                           "document.querySelector('#empty') !== null")
    assert page.locator("#empty").inner_text() == "No memory matches this search."  # hotels are all episodes

    # Pages: next, and the rows differ; the order is the same on every visit.
    page.goto(f"{live_server.url}/me/?q=meetings")
    first = page.locator("tr.memory-row").evaluate_all("rows => rows.map(r => r.id)")
    page.get_by_role("link", name="Next").click()
    page.wait_for_function("document.querySelector('#summary').textContent.includes('page 2 of')")
    second = page.locator("tr.memory-row").evaluate_all("rows => rows.map(r => r.id)")
    assert len(second) == 50 and not set(first) & set(second) and "page=2" in page.url
    said = page.locator("tr.memory-row .provenance").first.inner_text()
    assert re.fullmatch(r"You said: “I told you about meetings \(\d+\)” — \d{1,2} \w+ \d{4}", said), said
    page.reload()
    assert page.locator("tr.memory-row").evaluate_all("rows => rows.map(r => r.id)") == second

    # Another person sees none of it.
    page.context.clear_cookies()
    login(page, live_server.url, "bob", "bob-pass-123")
    page.goto(f"{live_server.url}/me/?q=hotels")
    bobs_hotels = sum(1 for i in range(50) if i % 4 == 1)
    assert summary(page).startswith(f"{bobs_hotels} memories found") and "curry" not in page.content()


def test_search_and_pages_work_without_javascript(live_server, browser, thousands):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    login(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/me/")
    page.fill("#id_q", "flights")
    page.select_option("#id_namespace", "user")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/me/?*q=flights*")
    flights = expected(topic=lambda it: "flights" in it.text)
    assert summary(page).startswith(f"{flights} memories found") and "page 1 of 10" in summary(page)
    page.get_by_role("link", name="Last").click()
    page.wait_for_url("**/me/?*page=10*")
    assert "page 10 of 10" in summary(page) and page.locator("tr.memory-row").count() == flights - 450
    context.close()


def test_bulk_delete_shows_each_deletions_status(live_server, page, thousands):
    login(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/me/?q=meals")
    rows = page.locator("tr.memory-row")
    chosen = [rows.nth(n).get_attribute("id").removeprefix("row-") for n in range(3)]
    for memory_id in chosen:
        page.locator(f"input[name=ids][value={memory_id}]").check()
    page.click("#delete-selected")
    expect(page.locator("#selected li")).to_have_count(3)  # the confirmation page, once it has loaded
    page.click("#confirm-delete-selected")
    page.wait_for_url("**/me/deletions/?subject=*")
    assert "Started 3 deletion(s)" in page.locator(".messages").inner_text()
    assert page.locator("tr.deletion").count() == 3
    assert page.locator('tr.deletion [data-status="pending"]').count() == 3

    for job in DeletionJob.objects.filter(memory_id__in=chosen):
        assert run_job(job.pk) == "completed"  # the worker's task, run here
    page.wait_for_function("document.querySelectorAll('tr.deletion [data-status=completed]').length === 3",
                           timeout=20_000)  # the page polls while any job runs
    page.goto(f"{live_server.url}/me/?q=meals")
    assert summary(page).startswith(f"{expected(topic=lambda it: 'meals' in it.text) - 3} memories found")


def test_a_guess_is_confirmed_or_denied_in_one_click(live_server, page, thousands):
    curry, golf = thousands["curry"], thousands["golf"]
    login(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/me/")
    row = page.locator(f"#row-{golf.pk}")
    assert row.locator(".badge").first.inner_text() == "Unconfirmed guess"
    assert row.locator(".provenance").inner_text().startswith(
        "The assistant guessed this from: “My colleague would not stop talking about golf.” — ")
    assert row.locator(".provenance").inner_text().endswith(" — not confirmed")
    save_screenshot(page, "me-search.png")

    page.locator(f"#row-{curry.pk}").get_by_role("button", name="That's right").click()
    page.wait_for_selector(f"#row-{curry.pk}", state="detached")  # htmx swapped in the confirmed memory
    confirmed = MemoryRecord.objects.get(supersedes=curry)
    new_row = page.locator(f"#row-{confirmed.pk}")
    new_row.wait_for()
    assert new_row.locator(".badge").first.inner_text() == "Current"
    assert new_row.locator(".provenance").inner_text().startswith("You confirmed the assistant's guess — ")
    assert confirmed.source_type == "explicit_user_statement"

    row.get_by_role("button", name="That's wrong").click()
    page.wait_for_selector(f'#row-{golf.pk}[data-status="deleting"]')
    assert "Deleting the guess" in row.inner_text()
    assert DeletionJob.objects.get(memory_id=golf.pk).requested_by.startswith("user:")
