"""/review/: reviewers' queue pages. Login required, tenant-scoped in SQL, masked where the class says so."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory.models import Candidate
from tests.consolidation.helpers import state
from tests.review.conftest import in_review, org_conflict

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_sends_anonymous_people_to_the_login_page(agent):
    candidate = in_review(agent)
    client = Client()

    for response in (client.get("/review/"), client.post(f"/review/candidates/{candidate.pk}/approve"),
                     client.get(f"/review/candidates/{candidate.pk}/edit")):
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert Candidate.objects.get(pk=candidate.pk).status == "review"


def test_it_shows_the_proposed_fact_evidence_current_record_and_reasons(agent, rita):
    said = state(agent, value="window", text="Prefers window seats", event_id="evt_said")
    candidate = in_review(agent, value="aisle", event_id="evt_inferred", said="Put me on the aisle, my knees.")

    page = client_for(rita).get("/review/").content.decode()

    assert f'id="item-candidate-{candidate.pk}"' in page
    assert "Prefers aisle seats" in page and "Put me on the aisle, my knees." in page
    assert said in page and "Prefers window seats" in page
    assert "differs_from_active" in page
    assert "Keep current" in page and "Use proposed" in page
    assert 'data-tenant="acme"' in page and '<span class="count">1</span>' in page


def test_another_tenants_reviewer_sees_nothing_and_gets_404(agent, gus):
    candidate = in_review(agent)
    conflict = org_conflict(agent)
    client = client_for(gus)

    page = client.get("/review/").content.decode()
    assert candidate.pk not in page and "Nothing is waiting for review." in page
    assert 'data-tenant="acme"' not in page
    assert client.get(f"/review/candidates/{candidate.pk}/edit").status_code == 404
    for url in (f"/review/candidates/{candidate.pk}/approve", f"/review/candidates/{candidate.pk}/reject",
                f"/review/candidates/{candidate.pk}/use-proposed", f"/review/conflicts/{conflict.pk}/use-proposed",
                f"/review/conflicts/{conflict.pk}/keep-current"):
        assert client.post(url, {"reason": "x"}).status_code == 404, url
    client.post("/review/bulk", {"action": "approve", "ids": [candidate.pk]})
    assert Candidate.objects.get(pk=candidate.pk).status == "review"


def test_a_person_who_reviews_nothing_sees_nothing(agent, tenant):
    from memory.identity.services import user_create

    candidate = in_review(agent)
    owner = user_create(tenant=tenant, username="olga", password="olga-pass-123", subject_external_id="usr_owner")

    page = client_for(owner).get("/review/").content.decode()

    assert "not a reviewer" in page and candidate.pk not in page


def test_it_masks_classes_reviewers_may_not_read(agent, rita):
    candidate = in_review(agent, namespace=["user", "health"], field="allergy", value="penicillin",
                          text="Allergic to penicillin", kind="health")

    page = client_for(rita).get("/review/").content.decode()

    assert candidate.pk in page and "penicillin" not in page and "masked" in page
    assert f"/review/candidates/{candidate.pk}/edit" not in page
    assert client_for(rita).get(f"/review/candidates/{candidate.pk}/edit").status_code == 302


def test_it_filters_by_namespace_kind_type_and_age(agent, rita):
    seat = in_review(agent, event_id="evt_a")
    hobby = in_review(agent, namespace=["user"], field="hobby", value="chess", text="Plays chess", kind="fact",
                      event_id="evt_b")
    conflict = org_conflict(agent)
    client = client_for(rita)

    def shown(**params):
        page = client.get("/review/", params).content.decode()
        return {key for key in (f"candidate-{seat.pk}", f"candidate-{hobby.pk}", f"conflict-{conflict.pk}")
                if f'id="item-{key}"' in page}

    assert len(shown()) == 3
    assert shown(namespace="user/travel_preferences") == {f"candidate-{seat.pk}"}
    assert shown(kind="fact") == {f"candidate-{hobby.pk}"}
    assert shown(type="conflict") == {f"conflict-{conflict.pk}"}
    assert shown(age="day") == shown()
    assert shown(age="older") == set()


def test_it_approves_with_a_plain_form_and_redirects_back(agent, rita):
    candidate = in_review(agent)

    response = client_for(rita).post(f"/review/candidates/{candidate.pk}/approve", {"next": "/review/?kind=x"})

    assert response.status_code == 302 and response["Location"] == "/review/?kind=x"
    candidate.refresh_from_db()
    assert candidate.status == "approved" and candidate.result_record.status == "active"


def test_it_never_redirects_off_site(agent, rita):
    candidate = in_review(agent)

    response = client_for(rita).post(f"/review/candidates/{candidate.pk}/approve", {"next": "https://evil.test/"})

    assert response["Location"] == "/review/"


def test_htmx_gets_the_refreshed_row_only(agent, rita):
    candidate = in_review(agent)

    response = client_for(rita).post(f"/review/candidates/{candidate.pk}/reject", {"reason": "a guess"},
                                     HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert response.status_code == 200
    assert body.startswith(f'<article class="card item" id="item-candidate-{candidate.pk}"')
    assert "rejected" in body and "<html" not in body


def test_reject_without_a_reason_changes_nothing(agent, rita):
    candidate = in_review(agent)

    client_for(rita).post(f"/review/candidates/{candidate.pk}/reject", {"reason": ""})

    assert Candidate.objects.get(pk=candidate.pk).status == "review"


def test_edit_and_approve_through_the_form(agent, rita):
    candidate = in_review(agent)
    client = client_for(rita)

    assert 'name="value"' in client.get(f"/review/candidates/{candidate.pk}/edit").content.decode()
    response = client.post(f"/review/candidates/{candidate.pk}/edit",
                           {"value": "aisle (front)", "text": "Prefers front aisle seats"})

    assert response.status_code == 302
    candidate.refresh_from_db()
    assert candidate.result_record.fact["value"] == "aisle (front)"


def test_bulk_reject_needs_a_reason(agent, rita):
    a = in_review(agent, field="seat", event_id="evt_a")
    client = client_for(rita)

    client.post("/review/bulk", {"action": "reject", "ids": [a.pk], "reason": ""})
    assert Candidate.objects.get(pk=a.pk).status == "review"
    client.post("/review/bulk", {"action": "reject", "ids": [a.pk], "reason": "noise"})
    assert Candidate.objects.get(pk=a.pk).status == "rejected"


def test_posts_need_the_csrf_token(agent, rita):
    candidate = in_review(agent)
    client = Client(enforce_csrf_checks=True)
    client.force_login(rita)

    assert client.post(f"/review/candidates/{candidate.pk}/approve").status_code == 403
    assert Candidate.objects.get(pk=candidate.pk).status == "review"


def test_the_queue_query_count_does_not_grow_with_items(agent, rita):
    client = client_for(rita)
    in_review(agent, field="f0", value="v0", text="Zero", event_id="evt_0")
    org_conflict(agent)
    with CaptureQueriesContext(connection) as few:
        client.get("/review/")
    facts = ["Plays the cello", "Commutes by bike", "Is learning Japanese", "Supports Benfica", "Hates cilantro"]
    for i, text in enumerate(facts, start=1):
        in_review(agent, field=f"f{i}", value=f"v{i}", text=text, event_id=f"evt_{i}")
    with CaptureQueriesContext(connection) as many:
        client.get("/review/")

    assert len(many) == len(few)
