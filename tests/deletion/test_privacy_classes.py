"""Privacy classes end to end: encryption at rest, no embedding, allowed readers and boundaries in SQL."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from memory.content import TEXT_PREFIX, fernet, rotate_parts, unseal_parts
from memory.identity.access import reviewer_of
from memory.identity.services import subject_get_or_create
from memory.models import MemoryClass, MemoryRecord, Subject
from memory.retrieval.embedding import embed_record_ids
from memory.scope import Scope
from tests.conftest import memory_body

pytestmark = pytest.mark.django_db

SECRET_WORDS = "peanutallergyzq"


def _write_sealed(agent) -> str:
    response = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "allergy", "value": SECRET_WORDS},
        text=f"Allergic: {SECRET_WORDS}", source={"type": "explicit_user_statement", "event_id": "evt_med"}))
    assert response.status_code == 201, response.json()
    assert response.json()["fact"] == {"field": "allergy", "value": SECRET_WORDS}  # the API shows plaintext
    return response.json()["memory_id"]


def test_an_encrypted_class_is_not_readable_as_plaintext_in_the_record_table(agent, vault):
    memory_id = _write_sealed(agent)

    with connection.cursor() as cursor:
        cursor.execute("SELECT fact::text, text, search_vector::text FROM memory_memoryrecord WHERE id = %s",
                       [memory_id])
        fact, text, search_vector = cursor.fetchone()
    assert SECRET_WORDS not in fact and SECRET_WORDS not in text
    assert '"sealed"' in fact and text.startswith(TEXT_PREFIX)
    assert search_vector is None  # a full-text vector would be plaintext beside the ciphertext
    assert agent.get(f"/api/v1/memories/{memory_id}").json()["text"] == f"Allergic: {SECRET_WORDS}"


def test_an_encrypted_class_that_says_so_is_not_embedded(agent, vault):
    memory_id = _write_sealed(agent)

    embed_record_ids([memory_id])

    assert MemoryRecord.objects.get(pk=memory_id).embedding is None


def test_keys_rotate_newest_first_and_old_tokens_still_open(agent, vault, settings):
    old_key = Fernet.generate_key().decode()
    settings.ENGRAM_FERNET_KEYS = [old_key]
    memory_id = _write_sealed(agent)
    stored = MemoryRecord.objects.get(pk=memory_id)

    new_key = Fernet.generate_key().decode()
    settings.ENGRAM_FERNET_KEYS = [new_key, old_key]
    assert unseal_parts(stored.fact, stored.text)[1] == f"Allergic: {SECRET_WORDS}"
    fact, text = rotate_parts(stored.fact, stored.text)

    settings.ENGRAM_FERNET_KEYS = [new_key]  # the old key retired
    assert unseal_parts(fact, text) == ({"field": "allergy", "value": SECRET_WORDS}, f"Allergic: {SECRET_WORDS}")
    assert unseal_parts(stored.fact, stored.text)[1] == "[encrypted: key unavailable]"
    assert fernet() is not None


def test_allowed_readers_is_a_sql_predicate(agent, tenant):
    MemoryClass.objects.create(tenant=tenant, name="private_notes", namespace_prefix="user/private",
                               allowed_readers=["owner"], model_permission="write")
    memory_id = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "private"], kind="note", fact={"field": "note", "value": "only me"},
        source={"type": "explicit_user_statement", "event_id": "evt_p"})).json()["memory_id"]
    owner = Scope(tenant_id=tenant.pk, subject_id=agent.subject.pk, subject_external_id="usr_owner",
                  permissions=frozenset({"read"}), namespaces=None, actor="user:1", reader_role="owner")
    as_agent = Scope(**{**owner.__dict__, "reader_role": "agent"})

    assert agent.get(f"/api/v1/memories/{memory_id}").status_code == 404  # the agent is not a reader
    assert memory_id not in [r["memory_id"] for r in agent.get("/api/v1/memories").json()["results"]]
    assert MemoryRecord.objects.for_scope(owner).filter(pk=memory_id).exists()
    sql = str(MemoryRecord.objects.for_scope(as_agent).query)
    assert "allowed_readers" in sql and "@>" in sql


def test_crossing_boundaries_is_opt_in_and_only_for_classes_that_may(agent, tenant, make_agent):
    org_agent = make_agent(tenant, "org_acme")
    org_subject = subject_get_or_create(tenant=tenant, external_id="org_acme")
    Subject.objects.filter(pk=org_subject.pk).update(kind="org")  # the token minted it as a user subject
    shared = org_agent.post("/api/v1/memories", memory_body(
        namespace=["org"], kind="policy", fact={"field": "travel_class", "value": "economy"},
        source={"type": "explicit_user_statement", "event_id": "evt_org"})).json()["memory_id"]
    private = org_agent.post("/api/v1/memories", memory_body(
        namespace=["project"], kind="fact", fact={"field": "budget", "value": "10k"},
        source={"type": "explicit_user_statement", "event_id": "evt_prj"})).json()["memory_id"]
    assert MemoryRecord.objects.get(pk=shared).subject_id == org_subject.pk
    user = Scope(tenant_id=tenant.pk, subject_id=agent.subject.pk, subject_external_id="usr_owner",
                 permissions=frozenset({"read"}), namespaces=None, actor="agent_key:1")

    assert not MemoryRecord.objects.for_scope(user).filter(pk__in=[shared, private]).exists()
    crossing = MemoryRecord.objects.for_scope(user, cross_boundaries=True)
    assert list(crossing.filter(pk__in=[shared, private]).values_list("pk", flat=True)) == [shared]


MARKER = "zqmarkerokra"


def test_an_encrypted_class_is_not_readable_as_plaintext_anywhere_in_the_database(agent, vault):
    """Record, source event, outcome, candidate with evidence, audit and retrieval log: no plaintext.

    The owner's reads (the record, the candidate list, the export) still show it as it was said."""
    from memory.consolidation.pipeline import consolidate
    from memory.models import Candidate
    from tests.deletion.helpers import tables_containing

    written = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "allergy", "value": f"{MARKER} peanuts"},
        text=f"Allergic to peanuts {MARKER}",
        source={"type": "explicit_user_statement", "event_id": "evt_enc_1", "text": f"I said {MARKER} once"}))
    assert written.status_code == 201, written.json()
    outcome = agent.post("/api/v1/outcomes", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "blood_type", "value": f"A+ {MARKER}"},
        text=f"Blood type A+ {MARKER}",
        source={"type": "verified_outcome", "event_id": "evt_enc_2", "text": f"Lab result {MARKER}"}))
    assert outcome.status_code == 201, outcome.json()
    candidate = agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "diet", "value": f"vegan {MARKER}"},
        text=f"Eats vegan {MARKER}", source={"type": "model_inferred", "event_id": "evt_enc_3",
                                             "text": f"The user said vegan {MARKER}"},
        evidence=[{"event_id": "evt_enc_4", "text": f"Again vegan {MARKER}"}]))
    assert candidate.status_code in (200, 201, 202), candidate.json()
    candidate_id = Candidate.objects.get(source_event__external_id="evt_enc_3").pk
    consolidate(candidate_id)  # normalises and decides; must keep the content sealed
    # Retrieval cannot find sealed records (no full-text vector, no embedding); the call still logs.
    retrieved = agent.post("/api/v1/retrieve", {"query": "allergy peanuts blood type",
                                                "namespaces": [["user", "medical"]]})
    assert retrieved.status_code == 200, retrieved.json()

    hits = tables_containing(MARKER)
    assert hits == [], ", ".join(hits)
    assert MARKER in agent.get(f"/api/v1/memories/{written.json()['memory_id']}").json()["text"]
    export = agent.get("/api/v1/export")
    assert export.status_code == 200
    body = str(export.json())
    assert f"I said {MARKER} once" in body and f"Again vegan {MARKER}" in body and f"Eats vegan {MARKER}" in body
    assert TEXT_PREFIX not in body


def test_a_sealed_candidate_is_reviewed_merged_and_approved_in_plaintext_but_stored_sealed(agent, tenant):
    from memory.consolidation import review
    from memory.consolidation.pipeline import consolidate
    from memory.identity.services import user_create
    from memory.models import Candidate
    from review.queue import candidate_item
    from tests.deletion.helpers import tables_containing

    MemoryClass.objects.create(
        tenant=tenant, name="clinic", namespace_prefix="user/clinic", allowed_readers=["owner", "agent", "reviewer"],
        model_permission="write", sensitivity="sensitive", encryption_required=True, embed=False)
    rita = user_create(tenant=tenant, username="rita", password="rita-pass-123", reviewer=True)

    def propose(event_id: str, quote: str) -> Candidate:
        response = agent.post("/api/v1/candidates", memory_body(
            namespace=["user", "clinic"], kind="health", fact={"field": "doctor", "value": f"Dr  {MARKER}"},
            text=f"Sees   Dr {MARKER}", source={"type": "model_inferred", "event_id": event_id, "text": quote}))
        assert response.status_code == 202, response.json()
        assert response.json()["text"] == f"Sees   Dr {MARKER}"  # the API answers in plaintext
        return Candidate.objects.get(source_event__external_id=event_id)

    first = propose("evt_clinic_1", f"My doctor is {MARKER}")
    assert consolidate(first.pk) == "review"  # sensitive: a person decides
    twin = propose("evt_clinic_2", f"Saw {MARKER} again")
    assert consolidate(twin.pk) == "merged"  # the same (unsealed) fact dedupes
    replay = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "clinic"], kind="health", fact={"field": "clinic", "value": "north"},
        text="Goes to the north clinic", source={"type": "explicit_user_statement", "event_id": "evt_clinic_3"}))
    assert replay.status_code == 201, replay.json()
    again = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "clinic"], kind="health", fact={"field": "clinic", "value": "north"},
        text="Goes to the north clinic", source={"type": "explicit_user_statement", "event_id": "evt_clinic_3"}))
    assert again.status_code == 200 and again.json()["memory_id"] == replay.json()["memory_id"]  # idempotent

    hits = tables_containing(MARKER)
    assert hits == [], ", ".join(hits)
    first.refresh_from_db()
    item = candidate_item(first)
    assert item.proposed_value == f"Dr {MARKER}" and item.proposed_text == f"Sees Dr {MARKER}"
    assert [e["text"] for e in item.evidence] == [f"My doctor is {MARKER}", f"Saw {MARKER} again"]

    approval = review.candidate_approve(reviewer=reviewer_of(rita), candidate_id=first.pk)
    assert agent.get(f"/api/v1/memories/{approval.result.record.pk}").json()["text"] == f"Sees Dr {MARKER}"
    hits = tables_containing(MARKER)
    assert hits == [], ", ".join(hits)


def test_deleting_a_sealed_record_removes_its_words_from_sealed_evidence_elsewhere(agent, vault):
    from memory.content import unseal_evidence
    from memory.deletion.models import DeletionJob
    from memory.models import Candidate
    from tests.deletion.helpers import run_job

    said = f"I react badly to {MARKER} nuts"
    memory_id = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "allergy", "value": f"{MARKER} nuts"},
        text=f"Allergic to {MARKER} nuts",
        source={"type": "explicit_user_statement", "event_id": "evt_del_1", "text": said})).json()["memory_id"]
    agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "diet", "value": "no nuts"},
        text="Avoids nuts", source={"type": "model_inferred", "event_id": "evt_del_2", "text": "avoid nuts"},
        evidence=[{"event_id": "evt_del_1", "text": said}]))
    quoting = Candidate.objects.get(source_event__external_id="evt_del_2")
    assert said in [e["text"] for e in unseal_evidence(quoting.evidence)]

    job_id = agent.delete(f"/api/v1/memories/{memory_id}").json()["deletion_id"]
    assert run_job(job_id) == "completed", DeletionJob.objects.get(pk=job_id).reason

    quoting.refresh_from_db()
    assert said not in [e["text"] for e in unseal_evidence(quoting.evidence)]
    assert [e["text"] for e in unseal_evidence(quoting.evidence)] == ["avoid nuts"]
