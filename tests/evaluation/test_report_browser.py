"""The HTML report opens in a real Chromium: summary, one chart per metric, the adversarial cases.

Saves docs/screenshots/evaluation-report.png (the screenshot the README shows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.evaluation.suite import METRICS

pytestmark = [pytest.mark.browser]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "evaluation-report.png"


def test_it_opens_the_html_report_in_chromium(fast_report: dict, page: Any) -> None:
    page.goto(Path(fast_report["_html"]).as_uri())
    assert "PASS" in page.locator("h1").inner_text()
    assert page.locator("#summary tr").count() == len(METRICS) + 1
    for name in METRICS:
        chart = page.locator(f"#metric-{name} svg")
        assert chart.is_visible()
        assert chart.bounding_box()["height"] > 40
    rows = page.locator("#adversarial tr")
    assert rows.count() == 6
    assert page.locator("#adversarial td.pass").count() == 5
    assert page.locator("#failing").inner_text() == "None."
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 20_000
