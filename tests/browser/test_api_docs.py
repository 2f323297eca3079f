"""The API reference pages render the contract in a real Chromium, from this host alone: every request the
page makes (scripts, styles, fonts, images, the schema) goes to the live server, or is refused by the
browser under the pages' Content-Security-Policy before it is sent (ReDoc's bundle asks for its vendor's
logo from a CDN); and every operation of the schema is listed.

They are not in the accessibility sweep of the project's own pages (tests/browser/test_accessibility.py):
their markup is Swagger UI's and ReDoc's. They are checked with axe here, with the two rules Swagger UI's
own markup breaks named (its operation headers nest buttons; its version stamp is light grey).

Their scripts run under a nonce drawn for each response, never under 'unsafe-inline'; axe is injected as an
inline script by the test itself, so that test's browser context bypasses the policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.contract import operations, served_schema
from tests.conftest import axe_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def recorded(page: Any) -> dict[str, str | None]:
    """Every URL the page asks for from now on, with why it failed (None: it did not)."""
    attempts: dict[str, str | None] = {}
    page.on("request", lambda request: attempts.setdefault(request.url, None))
    page.on("requestfailed", lambda request: attempts.__setitem__(request.url, request.failure))
    return attempts


def elsewhere(attempts: dict[str, str | None], base: str) -> list[str]:
    """Requests that went to another host: anything not local and not stopped by the browser's CSP."""
    return [url for url, failure in attempts.items()
            if not url.startswith((base + "/", "data:", "blob:")) and failure != "csp"]


def test_swagger_ui_lists_every_operation_and_loads_nothing_from_elsewhere(live_server, page):
    urls = recorded(page)
    schema = served_schema()

    page.goto(f"{live_server.url}/api/v1/docs/")
    page.wait_for_selector(".opblock-summary-operation-id")
    page.wait_for_load_state("networkidle")

    shown = set(page.locator(".opblock-summary-operation-id").all_inner_texts())
    assert shown == {op["operationId"] for op in operations(schema).values()}
    tags = set(page.locator(".opblock-tag").all_inner_texts())
    assert all(any(t["name"] in shown_tag for shown_tag in tags) for t in schema["tags"]), tags
    assert f"{live_server.url}/api/v1/schema" in urls
    assert elsewhere(urls, live_server.url) == []


def test_swagger_ui_shows_an_operations_request_example_and_its_error_codes(live_server, page):
    page.goto(f"{live_server.url}/api/v1/docs/#/memories/memories_create")
    block = page.locator("#operations-memories-memories_create")
    block.wait_for()

    text = block.inner_text()
    assert "evt_seat_1" in text  # the request example
    assert "secret_detected" in text and "class_not_allowed" in text  # the 422 codes


def test_redoc_lists_every_operation_and_loads_nothing_from_elsewhere(live_server, page):
    urls = recorded(page)
    schema = served_schema()

    page.goto(f"{live_server.url}/api/v1/redoc/")
    page.wait_for_selector("[data-section-id*='operation/']")
    page.wait_for_load_state("networkidle")

    sections = page.eval_on_selector_all("[data-section-id*='operation/']",
                                         "els => els.map(e => e.getAttribute('data-section-id'))")
    shown = {s.rsplit("operation/", 1)[1] for s in sections}
    assert shown == {op["operationId"] for op in operations(schema).values()}
    assert elsewhere(urls, live_server.url) == []


# Swagger UI's markup, not ours: what axe finds there that no template of ours can change.
SWAGGER_UIS_OWN = (" nested-interactive ", " color-contrast ")


def script_src(policy: str) -> list[str]:
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    return directives["script-src"].split()


@pytest.mark.parametrize(("path", "ready"), [("/api/v1/docs/", ".opblock-summary-operation-id"),
                                             ("/api/v1/redoc/", "[data-section-id*='operation/']")])
def test_the_pages_run_their_scripts_under_a_nonce_without_unsafe_inline(live_server, page, path, ready):
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)

    first = page.goto(f"{live_server.url}{path}")
    page.wait_for_selector(ready)  # the page's own inline script ran: it is what renders the operations
    policy = first.headers["content-security-policy"]
    sources = script_src(policy)
    assert "'unsafe-inline'" not in sources and "'unsafe-eval'" not in sources
    nonces = [s for s in sources if s.startswith("'nonce-")]
    assert len(nonces) == 1 and len(nonces[0]) >= len("'nonce-'") + 22
    assert page.locator("script[nonce]").count() == 1
    assert [m for m in refused if "script" in m] == []

    again = page.goto(f"{live_server.url}{path}")
    assert [s for s in script_src(again.headers["content-security-policy"]) if s.startswith("'nonce-")] != nonces


def test_an_inline_script_without_the_nonce_does_not_run(live_server, page):
    page.goto(f"{live_server.url}/api/v1/redoc/")
    page.wait_for_selector("[data-section-id*='operation/']")
    page.evaluate("""() => { const s = document.createElement('script');
                             s.textContent = 'window.injected = true'; document.body.appendChild(s); }""")
    assert page.evaluate("() => window.injected === true") is False


def test_the_reference_pages_pass_axe_but_for_swagger_uis_own_markup(live_server, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(f"{live_server.url}/api/v1/redoc/")
        page.wait_for_selector("[data-section-id*='operation/']")
        assert axe_violations(page) == []

        page.goto(f"{live_server.url}/api/v1/docs/")
        page.wait_for_selector(".opblock-summary-operation-id")
        found = axe_violations(page)
        assert [v for v in found if not any(rule in v for rule in SWAGGER_UIS_OWN)] == []
    finally:
        context.close()
