"""The overview's charts in a real Chromium: drawn with data, their numbers in a table, axe-clean, no script,
and the page's Content-Security-Policy the same as a page without charts."""

from __future__ import annotations

import pytest

from tests.conftest import axe_violations, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHARTS = ["chart-retrievals", "chart-refusals", "chart-waiting", "chart-deletions"]


def table(page, chart_id: str) -> dict[str, list[str]]:
    """The chart's numbers table (inside a closed <details>, so text_content): row label -> its cells."""
    rows = page.locator(f"#{chart_id} details.numbers tbody tr")
    return {rows.nth(i).locator("th").text_content(): rows.nth(i).locator("td").all_text_contents()
            for i in range(rows.count())}


def column_total(rows: dict[str, list[str]], column: int = 0) -> float:
    return sum(float(cells[column]) for cells in rows.values())


def test_the_overview_draws_its_charts_with_data_and_passes_axe(live_server, page, known_state):
    login(page, live_server.url, "rita", "rita-pass-123")
    response = page.goto(f"{live_server.url}/review/overview/")
    without_charts = page.request.get(f"{live_server.url}/review/overview/worker/")

    assert response.headers.get("content-security-policy") == without_charts.headers.get("content-security-policy")
    for chart_id in CHARTS:
        chart = page.locator(f"#{chart_id}")
        assert chart.locator("svg[role=img] title").count() >= 1, chart_id
        assert chart.locator("a").get_attribute("href").startswith("/review/overview/"), chart_id
    assert page.locator("#charts script").count() == 0
    assert "http" not in page.locator("#charts").inner_html().replace('xmlns="http://www.w3.org/2000/svg"', "")

    # known_state: two retrievals, two secret_detected + one class_not_allowed + one insufficient_scope
    # refusals, two candidates and one conflict waiting, one completed deletion and one pending.
    assert page.locator("#chart-retrievals svg rect").count() >= 1
    assert column_total(table(page, "chart-retrievals")) == 2
    refusals = table(page, "chart-refusals")
    header = page.locator("#chart-refusals thead th").all_text_contents()
    assert column_total(refusals, header.index("secret_detected") - 1) == 2
    assert column_total(refusals, header.index("class_not_allowed") - 1) == 1
    assert page.locator("#chart-refusals .legend li").count() == len(header) - 1
    waiting = table(page, "chart-waiting")
    assert waiting["Candidates to review"] == ["2"] and waiting["Open conflicts"] == ["1"]
    assert waiting["Deletions waiting"] == ["1"]
    deletions = table(page, "chart-deletions")
    assert column_total(deletions, 1) == 1  # jobs completed in the last 24 hours
    assert page.locator("#chart-deletions svg rect").count() == 1
    assert "the most" in page.locator("#chart-retrievals-svg desc").text_content()

    assert axe_violations(page) == []
    for chart_id in CHARTS:  # the tables too, once shown
        page.locator(f"#{chart_id} details.numbers summary").click()
    assert page.locator("#chart-retrievals details.numbers table").is_visible()
    assert axe_violations(page) == []

    page.locator("#chart-retrievals a").click()
    page.wait_for_url("**/review/overview/retrievals/")
