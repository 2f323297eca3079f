"""One regression test per policy hole found by probing every route with narrowed keys.

Each test names the hole it closes; the route-by-route matrices (test_scope_matrix.py,
test_namespace_grants.py) cover the same ground exhaustively.
"""

from __future__ import annotations

import json

import pytest

from memory.models import AuditEntry, Candidate, MemoryClass, MemoryRecord
from tests.conftest import memory_body
from tests.deletion.helpers import tables_containing
from tests.gate.conftest import ORG_WORDS, USER_WORDS

pytestmark = pytest.mark.django_db


# --- every read surface needs the read scope -------------------------------------------------------

READ_SURFACES = [
    "/api/v1/memories", "/api/v1/memories/{user_record}", "/api/v1/memories/{user_record}/history",
    "/api/v1/export", "/api/v1/facts?namespace=user/travel_preferences&field=seat",
    "/api/v1/retrievals/{retrieval_id}", "/api/v1/deletions/{deletion_id}",
    "/api/v1/procedures/{procedure}/proposals", "/api/v1/procedures/{procedure}/proposals/{proposal_id}",
]


@pytest.mark.parametrize("scopes", [["propose"], ["write"], ["mint"]])
def test_a_key_without_read_reads_nothing(world, make_agent, tenant, scopes):
    narrow = make_agent(tenant, "usr_owner", scopes=scopes)

    for template in READ_SURFACES:
        response = narrow.get(template.format(**world.__dict__))
        assert response.status_code == 403, (template, response.status_code)
        assert response.json()["code"] == "insufficient_scope"


# --- correction goes through the write gate --------------------------------------------------------


def _inferred_record(agent) -> str:
    """A candidate-confidence record in the propose-only class user/inferred, as consolidation keeps it."""
    from memory.consolidation.pipeline import consolidate

    candidate_id = agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "inferred"], kind="guess", fact={"field": "mood", "value": "calm"}, text="Seems calm",
        source={"type": "model_inferred", "event_id": "evt_guess"})).json()["candidate_id"]
    assert consolidate(candidate_id) == "retrievable"
    return MemoryRecord.objects.get(namespace="user/inferred", status="active").pk


def test_a_correction_into_a_propose_only_class_is_refused_like_a_write(agent):
    record_id = _inferred_record(agent)
    direct = agent.post("/api/v1/memories", memory_body(namespace=["user", "inferred"], kind="guess",
                                                        fact={"field": "mood", "value": "sad"}))
    assert direct.status_code == 422 and direct.json()["code"] == "class_not_allowed"

    response = agent.post(f"/api/v1/memories/{record_id}/correct", {"fact": {"value": "sad"}})

    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "class_not_allowed"
    assert MemoryRecord.objects.filter(namespace="user/inferred", confidence="confirmed").count() == 0
    assert MemoryRecord.objects.get(pk=record_id).status == "active"


MARKER = "zqcorrectedwords"


def test_a_correction_in_an_encrypted_class_stores_no_plaintext_anywhere(agent, vault):
    old = agent.post("/api/v1/memories", memory_body(
        namespace=["user", "medical"], kind="health", fact={"field": "allergy", "value": "pollen"},
        text="Allergic to pollen", source={"type": "explicit_user_statement", "event_id": "evt_m1"})).json()

    response = agent.post(f"/api/v1/memories/{old['memory_id']}/correct", {
        "fact": {"value": f"{MARKER} nuts"}, "text": f"Allergic to {MARKER} nuts",
        "source": {"text": f"Actually it is {MARKER} nuts"}})

    assert response.status_code == 201, response.json()
    assert response.json()["text"] == f"Allergic to {MARKER} nuts"  # the owner reads it in plaintext
    hits = tables_containing(MARKER)
    assert hits == [], ", ".join(hits)


def test_a_correction_writes_one_audit_row(agent):
    old = agent.post("/api/v1/memories", memory_body()).json()["memory_id"]

    new = agent.post(f"/api/v1/memories/{old}/correct", {"fact": {"value": "window"}}).json()["memory_id"]

    rows = list(AuditEntry.objects.filter(object_id=new))
    assert [r.action for r in rows] == ["memory.correct"]
    assert rows[0].data["corrects"] == old and rows[0].data["superseded"] == [old]


# --- namespace segments are validated strictly -----------------------------------------------------


@pytest.mark.parametrize("namespace", [["user", "health\n"], ["user", "inferred\n"], ["user\n"],
                                       ["user", " health"], ["user", "health "], ["user", "he\tlth"],
                                       ["user", "heal\x00th"], ["user", "Health"], ["user", ""]])
def test_a_namespace_segment_with_control_characters_or_spaces_is_refused(agent, namespace):
    response = agent.post("/api/v1/memories", memory_body(namespace=namespace))

    assert response.status_code == 400, response.json()
    assert MemoryRecord.objects.count() == 0


def test_names_and_query_string_namespaces_are_validated_as_strictly(agent):
    assert agent.post("/api/v1/memories", memory_body(kind="preference\n")).status_code == 400
    assert agent.post("/api/v1/memories", memory_body(
        fact={"field": "seat\n", "value": "aisle"})).status_code == 400
    assert agent.get("/api/v1/memories", {"namespace": "user/health\n"}).status_code == 400
    assert agent.get("/api/v1/facts", {"namespace": "user/health\n", "field": "x"}).status_code == 400
    assert MemoryRecord.objects.count() == 0


# --- a namespace grant filters every section -------------------------------------------------------


@pytest.fixture
def user_only(world, make_agent, tenant):
    return make_agent(tenant, "usr_owner", namespaces=["user"])


def test_export_to_a_namespace_restricted_key_holds_nothing_of_other_namespaces(world, user_only):
    response = user_only.get("/api/v1/export")

    assert response.status_code == 200
    body = response.json()
    assert ORG_WORDS not in json.dumps(body), [k for k, v in body.items() if ORG_WORDS in json.dumps(v)]
    assert USER_WORDS in json.dumps(body["records"]) and USER_WORDS in json.dumps(body["candidates"])
    assert USER_WORDS in json.dumps(body["events"])
    assert body["threads"] == [] and body["summaries"] == []  # no "threads" grant


def test_a_retrieval_log_shows_a_restricted_reader_only_what_it_may_see(world, user_only):
    wide = world.owner.get(f"/api/v1/retrievals/{world.retrieval_id}").json()
    assert ORG_WORDS in json.dumps(wide["candidates"])  # the writer saw both

    response = user_only.get(f"/api/v1/retrievals/{world.retrieval_id}")

    assert response.status_code == 200
    candidates = response.json()["candidates"]
    assert ORG_WORDS not in json.dumps(response.json())
    assert any(USER_WORDS in (c.get("text") or "") for c in candidates)


# --- minting never widens a key --------------------------------------------------------------------


def test_a_restricted_key_mints_tokens_no_wider_than_itself(world, tenant, make_agent):
    from memory.identity.services import agent_key_create

    _, minter = agent_key_create(tenant=tenant, name="minter", permissions=["mint"], namespaces=["user"])
    auth = {"HTTP_AUTHORIZATION": f"Bearer {minter}"}
    client = world.owner.client

    default = client.post("/api/v1/principal-tokens", {"subject_id": "usr_owner"}, format="json", **auth)
    assert default.status_code == 201, default.json()
    assert default.json()["namespaces"] == ["user"]
    wider = client.post("/api/v1/principal-tokens", {"subject_id": "usr_owner", "namespaces": [["org"]]},
                        format="json", **auth)
    assert wider.status_code == 403 and wider.json()["code"] == "namespace_forbidden"
    # The narrowed token stays narrow with any other key of the tenant, however wide that key is.
    wide_key = make_agent(tenant, None)
    reader = world.owner.client.get(f"/api/v1/memories/{world.org_record}",
                                    HTTP_AUTHORIZATION=f"Bearer {wide_key.key}",
                                    HTTP_X_ENGRAM_PRINCIPAL=default.json()["token"])
    assert reader.status_code == 404


# --- thread state and deletion status follow the grant ---------------------------------------------


def test_thread_state_needs_a_threads_grant(world, tenant, make_agent):
    no_threads = make_agent(tenant, "usr_owner", namespaces=["user"])
    with_threads = make_agent(tenant, "usr_owner", namespaces=["user", "threads"])

    for path in (f"/api/v1/threads/{world.thread_id}", f"/api/v1/threads/{world.thread_id}/events",
                 f"/api/v1/workflows/{world.workflow_id}/checkpoint", "/api/v1/threads"):
        refused = no_threads.get(path)
        assert refused.status_code == 403 and refused.json()["code"] == "namespace_forbidden", path
        assert with_threads.get(path).status_code == 200, path
    assert no_threads.post("/api/v1/threads", {"title": "x"}).status_code == 403
    summaries = no_threads.post("/api/v1/retrieve", {"query": "flight", "include": ["summaries"]}).json()
    assert summaries["packets"] == []


def test_deletion_status_needs_every_record_of_the_job_inside_the_grant(world, tenant, make_agent):
    user_only = make_agent(tenant, "usr_owner", namespaces=["user"])
    org_too = make_agent(tenant, "usr_owner", namespaces=["user", "org"])

    assert user_only.get(f"/api/v1/deletions/{world.deletion_id}").status_code == 404
    assert org_too.get(f"/api/v1/deletions/{world.deletion_id}").status_code == 200
    erase = user_only.delete("/api/v1/subject")
    assert erase.status_code == 403 and erase.json()["code"] == "namespace_forbidden"


def test_an_erased_subjects_deletion_status_keeps_the_grant(world, tenant, make_agent):
    from memory.deletion.tasks import run_deletion

    restricted = make_agent(tenant, "usr_owner", namespaces=["user"])
    job_id = world.owner.delete("/api/v1/subject").json()["deletion_id"]
    assert run_deletion(job_id) == "completed"

    assert world.owner.get(f"/api/v1/deletions/{job_id}").status_code == 200
    assert restricted.get(f"/api/v1/deletions/{job_id}").status_code == 404


def test_export_to_an_agent_leaves_out_candidates_of_classes_agents_may_not_read(agent, tenant):
    MemoryClass.objects.create(tenant=tenant, name="diary", namespace_prefix="user/diary",
                               allowed_readers=["owner"], model_permission="propose")
    agent.post("/api/v1/candidates", memory_body(
        namespace=["user", "diary"], kind="note", fact={"field": "note", "value": "zqdiaryonly"},
        source={"type": "model_inferred", "event_id": "evt_diary", "text": "zqdiaryonly said"}))
    assert Candidate.objects.filter(namespace="user/diary").exists()

    assert "zqdiaryonly" not in json.dumps(agent.get("/api/v1/export").json())
