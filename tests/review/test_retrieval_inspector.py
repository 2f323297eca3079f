"""The retrieval inspector: a reviewer of the tenant sees why each candidate was kept or dropped; everyone
else gets a 404 (or the login page without a session)."""

from __future__ import annotations

import pytest

from memory.identity.services import user_create
from memory.models import MemoryClass
from tests.retrieval.conftest import remember, retrieve, sync_tasks  # noqa: F401 - fixtures used below

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(tenant):
    """The subject's own person: sees her memories in /me/, is no reviewer."""
    return user_create(tenant=tenant, username="alice", password="alice-pass-123", subject_external_id="usr_owner")


@pytest.fixture
def logged(agent, remember):  # noqa: F811 - the imported fixture
    remember(agent, "Prefers aisle seats on flights", field="seat", value="aisle")
    remember(agent, "Likes hotels with a gym", field="hotel", value="gym")
    body = retrieve(agent, "I like sitting by the corridor on planes", limit=1)
    return body["retrieval_id"]


def test_a_reviewer_sees_every_candidate_with_ranks_scores_and_the_reason(client, rita, logged, agent):
    client.force_login(rita)

    listing = client.get(f"/review/retrievals/?subject={agent.subject.pk}")
    detail = client.get(f"/review/retrievals/{logged}/")

    assert listing.status_code == 200 and logged in listing.content.decode()
    assert detail.status_code == 200
    html = detail.content.decode()
    assert "I like sitting by the corridor on planes" in html
    assert "Prefers aisle seats on flights" in html and "Likes hotels with a gym" in html
    rows = detail.context["candidates"]
    kept, dropped = rows[0], rows[1]
    assert kept["selected"] and kept["text"] == "Prefers aisle seats on flights"
    assert not dropped["selected"] and dropped["reason"] == "limit"
    assert dropped["lexical_rank"] == 1 and kept["lexical_rank"] is None  # "like" is its only shared word
    assert kept["semantic_rank"] == 1 and kept["similarity"] > dropped["similarity"]
    assert kept["score"] > dropped["score"] and kept["authority"] == "explicit_user_statement"
    assert detail.context["budget_used"] == kept["tokens"] and detail.context["budget_tokens"] == 400


def test_texts_of_classes_reviewers_may_not_read_are_masked(client, rita, agent, remember):  # noqa: F811 - the imported fixture
    MemoryClass.objects.filter(tenant=agent.tenant, namespace_prefix="user").update(allowed_readers=["agent", "owner"])
    remember(agent, "Sees a therapist on Tuesdays", field="therapy")
    retrieval_id = retrieve(agent, "therapist")["retrieval_id"]
    client.force_login(rita)

    html = client.get(f"/review/retrievals/{retrieval_id}/").content.decode()

    assert "Sees a therapist" not in html and "not readable by reviewers" in html


def test_another_tenants_reviewer_gets_404_and_no_session_gets_the_login_page(client, gus, alice, logged, agent):
    client.force_login(gus)
    assert client.get(f"/review/retrievals/{logged}/").status_code == 404
    assert client.get(f"/review/retrievals/?subject={agent.subject.pk}").status_code == 404
    assert logged not in client.get("/review/retrievals/").content.decode()
    client.force_login(alice)  # the subject's own person, not a reviewer: not an operator page
    assert client.get(f"/review/retrievals/{logged}/").status_code == 404
    client.logout()
    response = client.get(f"/review/retrievals/{logged}/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_navigation_shows_the_link_only_to_reviewers(client, rita, alice):
    client.force_login(alice)
    assert "/review/retrievals/" not in client.get("/me/").content.decode()
    client.force_login(rita)
    assert "/review/retrievals/" in client.get("/review/").content.decode()
