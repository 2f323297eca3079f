"""Structured values and names as people read them, in a real Chromium: the person's list, a record's history
and correction page, the review queue and its conflicts show objects as labelled fields and lists as lists
(never Python or JSON punctuation), a hostile value as the text it is, and names instead of subject ids."""

from __future__ import annotations

from typing import Any

import pytest

from memory.identity.services import subject_display_name_set, user_create
from memory.models import Subject
from tests.conftest import login, memory_body
from tests.consolidation.helpers import TRAVEL
from tests.review.conftest import in_review

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PUNCTUATION = ("{'", "'}", '": "', "{\"", "\"}", "['", "']")
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
BOOKING = {"route": "MUC-LIS", "order_id": "ORD-2026-0042", "legs": [{"flight": "LH1172", "seat": "14C"},
                                                                     {"flight": "TP555", "seat": "3A"}],
           "refundable": False, "price_eur": 189.5}


def said(agent: Any, field: str, value: Any, text: str, event_id: str) -> str:
    response = agent.post("/api/v1/memories", memory_body(
        fact={"field": field, "value": value}, text=text,
        source={"type": "explicit_user_statement", "event_id": event_id}))
    assert response.status_code == 201, response.json()
    return response.json()["memory_id"]


def org_policy(agent: Any, event_id: str, value: Any) -> None:
    response = agent.post("/api/v1/outcomes", {
        "namespace": ["org", "travel_policy"], "kind": "policy", "fact": {"field": "travel_class", "value": value},
        "text": f"Travel policy {event_id}", "source": {"type": "org_record", "event_id": event_id}})
    assert response.status_code == 201, response.json()


@pytest.fixture
def structured(agent, tenant) -> dict[str, Any]:
    """usr_owner (alice, named "Olive Owner") with an object, a list and a hostile value; a candidate with an
    object value in review; an open conflict between two object-valued org records."""
    user_create(tenant=tenant, username="alice", password="alice-pass-123", subject_external_id="usr_owner")
    user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)
    subject_display_name_set(subject=Subject.objects.get(tenant=tenant, external_id="usr_owner"),
                             display_name="Olive Owner")
    booking = said(agent, "last_booking", BOOKING, "Booked MUC-LIS", "evt_booking")
    said(agent, "seat_options", ["aisle", "exit row", {"when": "long haul", "seat": "bulkhead"}],
         "Seats she takes", "evt_seats")
    said(agent, "nickname", HOSTILE, "A nickname with markup in it", "evt_hostile")
    in_review(agent, namespace=TRAVEL, field="frequent_flyer",
              value={"programme": "Miles & More", "status": "Frequent Traveller", "lounge_access": True},
              text="Is a Frequent Traveller", event_id="evt_ff")
    org_policy(agent, "evt_policy_1", {"cabin": "economy", "max_fare_eur": 400})
    org_policy(agent, "evt_policy_2", {"cabin": "premium economy", "max_fare_eur": 900})
    return {"booking": booking}


def visible(page: Any) -> str:
    return page.locator("main").inner_text()


def assert_readable(page: Any) -> str:
    text = visible(page)
    for punctuation in PUNCTUATION:
        assert punctuation not in text, (page.url, punctuation, text)
    return text


def test_people_read_values_not_python_and_you_not_an_id(live_server, page, structured):
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, live_server.url, "alice", "alice-pass-123")

    page.goto(f"{live_server.url}/me/")
    text = assert_readable(page)
    assert "about you" in text and "usr_owner" not in text
    row = page.locator(f"#row-{structured['booking']}")
    assert row.locator("dt", has_text="Order id").count() == 1
    assert "ORD-2026-0042" in row.inner_text() and "LH1172" in row.inner_text() and "No" in row.inner_text()
    assert page.locator("tr.memory-row ul.v-list li").filter(has_text="exit row").count() == 1
    assert HOSTILE in text  # shown as the text it is...
    assert page.evaluate("window.__pwned") is None and dialogs == []  # ...and never run
    assert "&lt;script&gt;" in page.content()

    page.goto(f"{live_server.url}/me/memories/{structured['booking']}/")
    assert "Order id" in assert_readable(page)
    page.goto(f"{live_server.url}/me/memories/{structured['booking']}/correct")
    assert "Order id" in assert_readable(page)

    page.context.clear_cookies()
    login(page, live_server.url, "rita", "rita-pass-123")
    page.goto(f"{live_server.url}/review/")
    text = assert_readable(page)
    candidate = page.locator('article.item[data-type="candidate"]')
    assert candidate.locator(".proposed dt", has_text="Lounge access").count() == 1
    assert "Miles & More" in candidate.inner_text()
    assert candidate.locator(".subject-name").inner_text() == "Olive Owner"
    assert candidate.locator(".subject-id").inner_text() == "usr_owner"  # the id, secondary

    page.goto(f"{live_server.url}/review/?type=conflict")
    text = assert_readable(page)
    conflict = page.locator('article.item[data-type="conflict"]')
    assert conflict.count() == 1
    assert "Max fare eur" in text and "premium economy" in text and "900" in text
    assert conflict.locator(".current dt", has_text="Cabin").count() == 1
    assert page.evaluate("window.__pwned") is None and dialogs == []
