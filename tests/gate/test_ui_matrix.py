"""Every UI page × method × who is asking → the status it must give, and whether anything changed.

The pages come from the URL configuration, so a new page fails ``test_every_page_has_an_expectation``
until EXPECTED says what each person gets. People: nobody logged in, alice (linked to the subject
whose data the pages show), bob (another subject of the tenant), rita (a reviewer of the tenant),
gus (a reviewer of another tenant). Each call runs in a savepoint that is rolled back; "changed"
compares alice's data and the review queues before and after, so a refused action is seen to have
done nothing, and an allowed one to have done something.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from memory.consolidation.pipeline import consolidate
from memory.deletion.models import DeletionJob
from memory.identity.access import reviewer_of
from memory.identity.services import tenant_create, user_create
from memory.models import Candidate, Conflict, MemoryRecord
from memory.tombstones import subject_hash
from procedures.models import ChangeProposal, Procedure
from procedures.services import procedure_publish
from tests.conftest import memory_body
from tests.gate.routes import ui_routes

pytestmark = pytest.mark.django_db

PEOPLE = ("anon", "alice", "bob", "rita", "gus")
LOGIN = (302, False)  # to the login page, nothing done


def reviewer_only(status: int, changed: bool | None) -> dict[str, tuple[int, bool | None]]:
    """A reviewer's page or action: 404 for everyone else logged in (no existence oracle)."""
    return {"anon": LOGIN, "alice": (404, False), "bob": (404, False), "rita": (status, changed),
            "gus": (404, False)}


def alice_only(status: int, changed: bool | None) -> dict[str, tuple[int, bool | None]]:
    """A page about alice's own data: 404 for anyone else."""
    return {"anon": LOGIN, "alice": (status, changed), "bob": (404, False), "rita": (404, False),
            "gus": (404, False)}


def own_subject(status: int, changed: bool | None) -> dict[str, tuple[int, bool | None]]:
    """A page about whoever asks (their own subject); a person linked to no subject gets 404."""
    return {"anon": LOGIN, "alice": (status, changed), "bob": (status, False), "rita": (404, False),
            "gus": (404, False)}


def anyone(status: int) -> dict[str, tuple[int, bool | None]]:
    return {"anon": LOGIN, **{p: (status, False) for p in PEOPLE[1:]}}


def operators(status: int, other_tenant: int) -> dict[str, tuple[int, bool | None]]:
    """The operator's overview: reviewers (of their own tenants); 404 for people who review nothing."""
    return {"anon": LOGIN, "alice": (404, False), "bob": (404, False), "rita": (status, False),
            "gus": (other_tenant, False)}


C = "review/candidates/<str:candidate_id>/"
K = "review/conflicts/<int:conflict_id>/"
PP = "review/procedures/proposals/<str:proposal_id>/"
PR = "review/procedures/<int:procedure_id>/"
OV = "review/overview/"
M = "me/memories/<str:memory_id>/"
EXPECTED: dict[tuple[str, str], dict[str, tuple[int, bool | None]]] = {
    ("", "GET"): anyone(200),
    ("review/", "GET"): anyone(200),
    # Bulk answers every logged-in person with a redirect; only a reviewer's changes anything.
    ("review/bulk", "POST"): {"anon": LOGIN, "alice": (302, False), "bob": (302, False), "rita": (302, True),
                              "gus": (302, False)},
    (C + "approve", "POST"): reviewer_only(302, True),
    (C + "edit", "GET"): reviewer_only(200, False),
    (C + "edit", "POST"): reviewer_only(302, True),
    (C + "reject", "POST"): reviewer_only(302, True),
    (C + "keep-current", "POST"): reviewer_only(302, True),
    (C + "use-proposed", "POST"): reviewer_only(302, True),
    (K + "keep-current", "POST"): reviewer_only(302, True),
    (K + "use-proposed", "POST"): reviewer_only(302, True),
    ("review/procedures/", "GET"): anyone(200),
    (PP, "GET"): reviewer_only(200, False),
    (PP + "approve", "POST"): reviewer_only(302, True),
    (PP + "reject", "POST"): reviewer_only(302, True),
    (PP + "rebase/", "GET"): reviewer_only(302, False),  # not stale: back to the proposal
    (PP + "rebase", "POST"): reviewer_only(302, False),  # not stale: refused with a message
    (PR, "GET"): reviewer_only(200, False),
    (PR + "versions/<int:number>/", "GET"): reviewer_only(200, False),
    (PR + "versions/<int:number>/rollback", "POST"): reviewer_only(302, None),
    (OV, "GET"): operators(200, 200),
    (OV + "deletions/", "GET"): operators(200, 200),
    (OV + "deletions/<str:deletion_id>", "GET"): operators(200, 404),  # gus: not a job of his tenant
    (OV + "deletions/<str:deletion_id>/retry", "POST"): operators(302, 404),  # a completed job stays as it is
    (OV + "refusals/", "GET"): operators(200, 200),
    (OV + "embeddings/", "GET"): operators(200, 200),
    (OV + "worker/", "GET"): operators(200, 200),
    (OV + "retrievals/", "GET"): operators(200, 200),
    # The retrieval inspector: the list answers everyone (empty for people who review nothing), one retrieval
    # only the reviewers of its tenant.
    ("review/retrievals/", "GET"): anyone(200),
    ("review/retrievals/<str:retrieval_id>/", "GET"): reviewer_only(200, False),
    ("me/", "GET"): anyone(200),
    ("me/deletions/", "GET"): own_subject(200, False),
    # Bob's own selection: alice's memory is not among his, nothing is deleted.
    ("me/delete-selected", "POST"): own_subject(302, True),
    (M + "confirm", "POST"): alice_only(302, True),  # "That's right" on alice's guess
    (M + "deny", "POST"): alice_only(302, True),  # "That's wrong": its deletion job
    ("me/export", "GET"): own_subject(200, False),
    ("me/erase", "GET"): own_subject(200, False),
    ("me/erase", "POST"): own_subject(302, True),
    (M, "GET"): alice_only(200, False),
    (M + "correct", "GET"): alice_only(200, False),
    (M + "correct", "POST"): alice_only(302, True),
    (M + "delete", "GET"): alice_only(200, False),
    (M + "delete", "POST"): alice_only(302, True),
    ("me/deletions/<str:deletion_id>", "GET"): alice_only(200, False),
}
FORMS = {
    ("review/bulk", "POST"): {"action": "approve", "ids": ["{candidate_id}"]},
    (C + "edit", "POST"): {"value": "window", "text": "Prefers window seats"},
    (C + "reject", "POST"): {"reason": "not what was said"},
    (PP + "reject", "POST"): {"reason": "too vague"},
    ("me/erase", "POST"): {"confirm": "delete everything"},
    (M + "correct", "POST"): {"value": "window"},
    ("me/delete-selected", "POST"): {"ids": ["{memory_id}"], "confirm": "yes"},
}
# Pages acting on a guess (a retrievable candidate record) rather than a confirmed memory.
ON_THE_GUESS = {M + "confirm", M + "deny"}


@pytest.fixture
def ui_world(agent, tenant) -> dict[str, Any]:
    from memory.deletion.tasks import run_deletion

    people = {"alice": user_create(tenant=tenant, username="alice", password="pw-alice-123",
                                   subject_external_id="usr_owner"),
              "bob": user_create(tenant=tenant, username="bob", password="pw-bob-123",
                                 subject_external_id="usr_outsider"),
              "rita": user_create(tenant=tenant, username="rita", password="pw-rita-123", reviewer=True),
              "gus": user_create(tenant=tenant_create(slug="globex"), username="gus", password="pw-gus-123",
                                 reviewer=True)}
    memory_id = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]
    doomed = agent.post("/api/v1/memories", memory_body(
        fact={"field": "meal", "value": "vegetarian"}, text="Eats vegetarian meals",
        source={"type": "explicit_user_statement", "event_id": "evt_d", "text": "No meat for me"})
    ).json()["memory_id"]
    deletion_id = agent.delete(f"/api/v1/memories/{doomed}").json()["deletion_id"]
    assert run_deletion(deletion_id) == "completed"
    guess = agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "inferred"], kind="guess", fact={"field": "mood", "value": "calm"}, text="Seems calm",
        source={"type": "model_inferred", "event_id": "evt_guess"})).json()["candidate_id"]
    assert consolidate(guess) == "retrievable"
    candidate_id = agent.post("/api/v1/candidates", memory_body(
        fact={"field": "airline", "value": "TAP"}, text="Flies TAP",
        source={"type": "model_inferred", "event_id": "evt_cand"})).json()["candidate_id"]
    assert consolidate(candidate_id) == "review"
    for n, value in enumerate(("economy", "business")):
        response = agent.post("/api/v1/outcomes", memory_body(
            namespace=["org"], kind="policy", fact={"field": "travel_class", "value": value},
            source={"type": "org_record", "event_id": f"evt_org_{n}"}))
        assert response.status_code == 201, response.json()
    procedure_publish(tenant=tenant, name="booking", body="Book economy.", reviewer=reviewer_of(people["rita"]))
    proposal = agent.post("/api/v1/procedures/booking/proposals", {"body": "Book economy first."})
    assert proposal.status_code == 201, proposal.json()
    retrieval_id = agent.post("/api/v1/retrieve", {"query": "aisle seats"}).json()["retrieval_id"]
    return {"people": people, "memory_id": memory_id, "deletion_id": deletion_id, "candidate_id": candidate_id,
            "retrieval_id": retrieval_id,
            "guess_id": MemoryRecord.objects.get(namespace="user/inferred", status="active").pk,
            "conflict_id": Conflict.objects.get(status="open").pk, "proposal_id": proposal.json()["proposal_id"],
            "procedure_id": Procedure.objects.get(name="booking").pk, "number": 1}


def fingerprint(subject: Any) -> Any:
    """Alice's data and the review queues, as a value to compare."""
    return (sorted(MemoryRecord.objects.filter(subject_id=subject.pk).values_list("pk", "status")),
            sorted(Candidate.objects.values_list("pk", "status")),
            sorted(Conflict.objects.values_list("pk", "status")),
            sorted(ChangeProposal.objects.values_list("pk", "status")),
            DeletionJob.objects.filter(subject_hash=subject_hash(subject.tenant_id, subject.external_id)).count())


def test_every_page_has_an_expectation():
    declared = {r.pattern for r in ui_routes()}

    assert sorted(declared - {p for p, _ in EXPECTED}) == [], "UI pages without an entry in EXPECTED"
    assert sorted({p for p, _ in EXPECTED} - declared) == [], "entries in EXPECTED for pages that do not exist"


@pytest.mark.parametrize("person", PEOPLE)
def test_each_person_gets_exactly_what_the_table_says_on_every_page(ui_world, agent, person):
    client = Client()
    if person != "anon":
        client.force_login(ui_world["people"][person])
    routes = {r.pattern: r for r in ui_routes()}
    wrong = []
    for (pattern, method), by_person in EXPECTED.items():
        values = {**ui_world, "memory_id": ui_world["guess_id"]} if pattern in ON_THE_GUESS else ui_world
        url = routes[pattern].url(values)
        form = {k: [x.format(**ui_world) for x in v] if isinstance(v, list) else v
                for k, v in FORMS.get((pattern, method), {}).items()}
        with transaction.atomic():
            before = fingerprint(agent.subject)
            response = client.get(url) if method == "GET" else client.post(url, form)
            changed = fingerprint(agent.subject) != before
            transaction.set_rollback(True)
        status, expect_change = by_person[person]
        if response.status_code != status or (expect_change is not None and changed != expect_change):
            wrong.append(f"{method} /{pattern}: got {response.status_code} changed={changed}, "
                         f"expected {status} changed={expect_change}")

    assert wrong == [], "\n".join(wrong)
