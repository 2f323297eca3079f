"""The operator's overview: each figure against a known state, one query per figure, tenants kept apart."""

from __future__ import annotations

import re

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.conf import Conf

from memory.identity.services import user_create
from memory.models import AuditEntry, Tenant
from memory.refusals import ACTION as REFUSED
from tests.conftest import memory_body
from tests.deletion.helpers import tables_containing
from tests.review.conftest import SECRET

pytestmark = pytest.mark.django_db

def cell(html: str, tenant: str, css: str) -> str:
    row = re.search(rf'<tr data-tenant="{tenant}">(.*?)</tr>', html, re.S).group(1)
    return re.search(rf'<td class="{css}">(.*?)</td>', row, re.S).group(1)


def figure(html: str, tenant: str, css: str) -> int:
    return int(re.search(r'class="figure"[^>]*>(\d+)</a>', cell(html, tenant, css)).group(1))


def listed(html: str, tenant: str, css: str, attr: str, key: str) -> int:
    found = re.search(rf'data-{attr}="{key}">.*?<span class="n">(\d+)</span>', cell(html, tenant, css), re.S)
    return int(found.group(1))


def test_it_shows_each_figure_of_a_known_state(client, rita, known_state):
    client.force_login(rita)
    caches[Conf.CACHE].delete(Conf.Q_STAT)  # what workers started by earlier tests of this process reported

    html = client.get("/review/overview/").content.decode()

    assert figure(html, "acme", "pending-review") == 2 and "oldest" in cell(html, "acme", "pending-review")
    assert figure(html, "acme", "open-conflicts") == 1
    assert listed(html, "acme", "deletions", "status", "pending") == 1
    assert listed(html, "acme", "deletions", "status", "completed") == 1
    assert listed(html, "acme", "deletions", "status", "failed") == 0
    assert "oldest waiting" in cell(html, "acme", "deletions")
    assert figure(html, "acme", "embeddings-pending") >= 1  # no worker computed the kept record's vector
    assert figure(html, "acme", "retrievals") == 2
    assert listed(html, "acme", "refusals", "code", "secret_detected") == 2
    assert listed(html, "acme", "refusals", "code", "class_not_allowed") == 1
    assert listed(html, "acme", "refusals", "code", "insufficient_scope") == 1
    assert 'id="worker"' in html and 'data-status="down"' in html  # no qcluster reports in this test
    assert 'data-tenant="globex"' not in html  # rita does not review globex


def test_each_figure_links_to_the_page_that_explains_it(client, rita, known_state):
    client.force_login(rita)
    html = client.get("/review/overview/").content.decode()

    links = set(re.findall(r'href="(/review/[^"]+)"', html.replace("&amp;", "&")))

    assert "/review/?tenant=acme&type=candidate" in links and "/review/?tenant=acme&type=conflict" in links
    for url in ["/review/overview/deletions/?tenant=acme&status=pending",
                "/review/overview/embeddings/?tenant=acme", "/review/overview/retrievals/?tenant=acme",
                "/review/overview/refusals/?tenant=acme&code=secret_detected", "/review/overview/worker/"]:
        assert url in links, url
        assert client.get(url).status_code == 200, url
    pending = client.get("/review/overview/deletions/?tenant=acme&status=pending").content.decode()
    assert pending.count('class="job"') == 1
    job_id = re.search(r'href="/review/overview/deletions/(del_[^"]+)"', pending).group(1)
    assert 'data-step="verification"' in client.get(f"/review/overview/deletions/{job_id}").content.decode()
    secrets = client.get("/review/overview/refusals/?tenant=acme&code=secret_detected").content.decode()
    assert secrets.count('class="refusal"') == 2 and "api:memories" in secrets
    assert client.get("/review/overview/retrievals/?tenant=acme").content.decode().count("<td>2</td>") == 1


def test_refusals_are_recorded_without_their_content(agent, known_state):
    rows = AuditEntry.objects.filter(action=REFUSED)

    assert sorted(r.object_id for r in rows) == ["class_not_allowed", "insufficient_scope", "secret_detected",
                                                  "secret_detected"]
    assert all(set(r.data) == {"code", "route"} and r.actor.startswith("agent_key:") for r in rows)
    assert tables_containing(SECRET) == []


def test_a_refused_item_in_a_batch_is_recorded_too(agent):
    items = [memory_body(source={"type": "explicit_user_statement", "event_id": "evt_ok"}),
             memory_body(text=f"key {SECRET}", source={"type": "explicit_user_statement", "event_id": "evt_bad"})]

    response = agent.post("/api/v1/memories/batch", {"items": items})

    assert response.status_code == 200 and response.json()["error"] == 1
    assert list(AuditEntry.objects.filter(action=REFUSED).values_list("object_id", "data__route")) == [
        ("secret_detected", "api:memories-batch")]


def test_one_query_per_figure_however_many_tenants(client, make_tenant, known_state):
    staff = user_create(tenant=Tenant.objects.get(slug="acme"), username="sam", password="sam-pass-123")
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    # The worker panel reads one cache row per cluster that reported (django-q's stats), and a worker killed by an
    # earlier test of this process leaves an entry that expires, and is deleted, in the middle of this one.
    caches[Conf.CACHE].delete(Conf.Q_STAT)
    client.get("/review/overview/")  # a process's first page loads caches (content types, the session) once
    with CaptureQueriesContext(connection) as two:
        assert client.get("/review/overview/").status_code == 200
    for slug in ("t1", "t2", "t3"):
        make_tenant(slug)
    with CaptureQueriesContext(connection) as five:
        html = client.get("/review/overview/").content.decode()

    assert len(five) == len(two) and html.count("<tr data-tenant=") == 5
    assert figure(html, "globex", "pending-review") == 1  # staff see every tenant


def test_a_reviewer_sees_only_their_tenants_and_others_get_nothing(client, gus, alice, known_state):
    client.force_login(gus)
    html = client.get("/review/overview/").content.decode()
    assert figure(html, "globex", "pending-review") == 1 and 'data-tenant="acme"' not in html
    assert client.get("/review/overview/?tenant=acme").status_code == 404
    acme_job = re.search(r"del_\w+", str(list(AuditEntry.objects.filter(action="deletion.memory")
                                              .values_list("object_id", flat=True)))).group(0)
    assert client.get(f"/review/overview/deletions/{acme_job}").status_code == 404
    assert "secret_detected" not in client.get("/review/overview/refusals/").content.decode().split("<table")[1] \
        .split("</thead>")[1]

    client.force_login(alice)  # neither staff nor a reviewer
    for url in ["/review/overview/", "/review/overview/deletions/", "/review/overview/refusals/",
                "/review/overview/worker/", "/review/overview/embeddings/", "/review/overview/retrievals/"]:
        assert client.get(url).status_code == 404, url
    client.logout()
    assert client.get("/review/overview/")["Location"].startswith("/accounts/login/")


def test_navigation_shows_only_what_the_person_may_use(client, rita, alice):
    client.force_login(alice)
    nav = client.get("/me/").content.decode().split('<nav aria-label="Main">')[1].split("</nav>")[0]
    assert "My memories" in nav and "Review" not in nav and "Procedures" not in nav and "Overview" not in nav

    client.force_login(rita)
    nav = client.get("/review/").content.decode().split('<nav aria-label="Main">')[1].split("</nav>")[0]
    assert "My memories" not in nav and "Review" in nav and "Procedures" in nav and "Overview" in nav


def test_a_failed_deletion_is_counted_shown_and_retried_from_its_page(client, rita, gus, known_state):
    from memory.deletion.models import DeletionJob

    job = DeletionJob.objects.get(tenant__slug="acme", status="pending")
    DeletionJob.objects.filter(pk=job.pk).update(status="failed", reason="step 'x' failed after 3 attempts: down")
    client.force_login(rita)
    assert listed(client.get("/review/overview/").content.decode(), "acme", "deletions", "status", "failed") == 1
    page = client.get(f"/review/overview/deletions/{job.pk}").content.decode()
    assert 'id="retry"' in page and "failed after 3 attempts" in page

    client.force_login(gus)  # reviews globex only
    assert client.post(f"/review/overview/deletions/{job.pk}/retry").status_code == 404
    assert client.get(f"/review/overview/deletions/{job.pk}/retry").status_code in (404, 405)

    client.force_login(rita)
    response = client.post(f"/review/overview/deletions/{job.pk}/retry")

    assert response.status_code == 302 and response["Location"] == f"/review/overview/deletions/{job.pk}"
    job.refresh_from_db()
    assert job.status == "pending" and job.retry_at is None
    assert AuditEntry.objects.filter(action="deletion.retried", object_id=job.pk, actor=f"user:{rita.pk}").exists()
    assert 'id="retry"' not in client.get(f"/review/overview/deletions/{job.pk}").content.decode()


def test_a_job_waiting_for_its_automatic_retry_is_its_own_figure(client, rita, known_state):
    from datetime import timedelta

    from django.utils import timezone

    from memory.deletion.models import DeletionJob

    DeletionJob.objects.filter(tenant__slug="acme", status="pending").update(
        retry_at=timezone.now() + timedelta(minutes=1), retries=1, reason="step 'verification' failed")
    client.force_login(rita)

    html = client.get("/review/overview/").content.decode()

    assert listed(html, "acme", "deletions", "status", "retrying") == 1
    listing = client.get("/review/overview/deletions/?tenant=acme&status=retrying").content.decode()
    assert listing.count('<tr class="job"') == 1 and "next" in listing
