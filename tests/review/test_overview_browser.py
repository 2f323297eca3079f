"""The overview in a real Chromium with a real worker: figures, their links, and the screenshot."""

from __future__ import annotations

import pytest

from memory.queues import QUEUES
from tests.conftest import login, save_screenshot, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_an_operator_reads_the_overview_and_follows_each_figure(live_server, page, known_state, qcluster):
    login(page, live_server.url, "rita", "rita-pass-123")

    def worker_running() -> bool:  # every queue's cluster reporting: on a loaded host they start seconds apart
        page.goto(f"{live_server.url}/review/overview/")
        return (page.locator('#worker [data-status="ok"]').count() == 1
                and page.locator("#worker-clusters .figure").inner_text() == str(len(QUEUES)))
    wait_for(worker_running, timeout=60)
    # The worker finishes the pending deletion and computes the embeddings.
    wait_for(lambda: page.goto(f"{live_server.url}/review/overview/") and page.locator(
        'tr[data-tenant="acme"] .deletions [data-status="completed"] .n').inner_text() == "2", timeout=60)

    wait_for(worker_running, timeout=30)  # the cluster's report in the cache is refreshed periodically
    acme = page.locator('tr[data-tenant="acme"]')
    assert acme.locator(".pending-review .figure").inner_text() == "2"
    assert acme.locator(".open-conflicts .figure").inner_text() == "1"
    assert acme.locator('.deletions [data-status="pending"] .n').inner_text() == "0"
    assert acme.locator(".retrievals .figure").inner_text() == "2"
    assert acme.locator('.refusals [data-code="secret_detected"] .n').inner_text() == "2"
    assert page.locator("#worker-clusters .figure").inner_text() == str(len(QUEUES))  # a qcluster per queue
    save_screenshot(page, "overview.png", full_page=True)

    acme.locator(".pending-review .figure").click()
    page.wait_for_url("**/review/?tenant=acme&type=candidate")
    assert page.locator("article.item").count() == 2

    page.go_back()
    acme.locator('.refusals [data-code="secret_detected"] a').click()
    page.wait_for_url("**/review/overview/refusals/?tenant=acme&code=secret_detected")
    assert page.locator("tr.refusal").count() == 2
    assert "AKIA" not in page.content()

    page.goto(f"{live_server.url}/review/overview/")
    page.locator("#worker-clusters").click()
    page.wait_for_url("**/review/overview/worker/")
    assert page.locator("#clusters tbody tr").count() == len(QUEUES)
