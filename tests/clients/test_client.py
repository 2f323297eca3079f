"""Engram and AsyncEngram over real HTTP: every method, each test run once with the sync client and once
with the async one (driven through ``Both``, which awaits each call in a fresh event loop, so the async
client also proves it serves several loops)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from engram_client import (
    AuthenticationFailed,
    Conflict,
    Engram,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    PolicyRefused,
    PreconditionFailed,
    SecretDetected,
)
from engram_client.models import Candidate, DeletionJob, Memory, Packet, ThreadEvent
from memory.identity.access import reviewer_of
from tests.clients.conftest import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("run_tasks_inline")]

PREFS = ["user", "travel_preferences"]


class Both:
    """The async client behind the sync client's interface: each call is awaited in a fresh event loop."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return Both(attribute)

        def call(*args: Any, **kwargs: Any) -> Any:
            return run_async(attribute(*args, **kwargs))

        return call


@pytest.fixture(params=["sync", "async"])
def client(request: Any, server: Any) -> Any:
    return server.client() if request.param == "sync" else Both(server.aclient())


@pytest.fixture
def other(server: Any) -> Engram:
    return server.client("usr_outsider")


def test_it_remembers_reads_lists_and_searches(client: Any) -> None:
    memory = client.remember("Prefers aisle seats", namespace=PREFS, field="seat_preference", value="aisle",
                             source_text="I always take the aisle seat.")
    assert isinstance(memory, Memory)
    assert (memory.status, memory.confidence, memory.value, memory.source.type) == (
        "active", "confirmed", "aisle", "explicit_user_statement")
    assert memory.policy is not None and memory.policy.outcome == "activate"

    assert client.get(memory.memory_id).text == "Prefers aisle seats"
    assert client.fact("user/travel_preferences", "seat_preference").memory_id == memory.memory_id
    page = client.list(namespace="user", status="active")
    assert [m.memory_id for m in page.results] == [memory.memory_id] and page.next_offset is None

    result = client.search("Which seat does the traveller like?")
    assert isinstance(result.packets[0], Packet)
    top = result.packets[0]
    assert (top.memory_id, top.content, top.content_role, top.namespace) == (
        memory.memory_id, "Prefers aisle seats", "data", PREFS)
    assert result.budget.used > 0 and result.budget.limit == 400
    log = client.retrieval(result.retrieval_id)
    assert any(c.get("memory_id") == memory.memory_id and c["selected"] for c in log["candidates"])


def test_a_retried_write_is_stored_once(client: Any) -> None:
    first = client.remember("Vegetarian", namespace=PREFS, field="meal", event_id="evt_meal_1")
    again = client.remember("Vegetarian", namespace=PREFS, field="meal", event_id="evt_meal_1")
    assert again.memory_id == first.memory_id
    assert len(client.list(namespace=PREFS).results) == 1
    with pytest.raises(Conflict) as refused:
        client.remember("Vegan", namespace=PREFS, field="meal", event_id="evt_meal_1")
    assert (refused.value.status, refused.value.code) == (409, "idempotency_conflict")


def test_it_records_outcomes_and_proposes_candidates(client: Any) -> None:
    outcome = client.record_outcome(namespace="user/bookings", field="last_booking",
                                    value={"order_id": "ORD-1", "route": "MUC-LIS"}, text="Booked MUC-LIS")
    assert (outcome.source.type, outcome.value) == ("verified_outcome", {"order_id": "ORD-1", "route": "MUC-LIS"})
    referenced = client.record_outcome(namespace="user/bookings", field="invoice",
                                       reference={"system": "billing", "id": "INV-7"})
    assert referenced.source.reference == {"system": "billing", "id": "INV-7"}

    candidate = client.propose("Seems to like boutique hotels", namespace="user/inferred", field="hotel_style",
                               value="boutique", confidence=0.7, evidence=[{"text": "Loved that tiny hotel"}])
    assert isinstance(candidate, Candidate)
    assert (candidate.status, candidate.confidence) == ("pending", "candidate")
    with pytest.raises(NotFound):  # a candidate is never a fact
        client.fact("user/inferred", "hotel_style")


def test_it_corrects_with_history_and_a_retry_is_the_same_correction(client: Any) -> None:
    old = client.remember("Prefers aisle seats", namespace=PREFS, field="seat_preference", value="aisle")
    new = client.correct(old.memory_id, "window", text="Prefers window seats", event_id="evt_fix_1")
    assert (new.value, new.corrects, new.status) == ("window", old.memory_id, "active")
    assert client.correct(old.memory_id, "window", text="Prefers window seats",
                          event_id="evt_fix_1").memory_id == new.memory_id
    history = client.history(new.memory_id)
    assert [(m.memory_id, m.status) for m in history] == [(old.memory_id, "superseded"), (new.memory_id, "active")]


def test_wait_until_derived_returns_once_every_derived_item_is_done(client: Any) -> None:
    client.remember("Takes the night train to Vienna", namespace="user/profile", field="train", value="night")

    body = client.wait_until_derived(timeout=30)

    assert body["derived_pending"] == 0 and set(body["derived_pending_by_kind"].values()) == {0}
    assert client.search("overnight rail journey").packets[0].content == "Takes the night train to Vienna"


def test_forget_returns_the_job_and_wait_polls_it_to_completion(client: Any) -> None:
    memory = client.remember("Allergic to peanuts", namespace="user/profile", field="allergy", value="peanuts")
    job = client.forget(memory.memory_id, wait=True)
    assert isinstance(job, DeletionJob)
    assert job.status == "completed" and {s.name for s in job.steps} >= {"records", "verification"}
    assert client.deletion(job.deletion_id).status == "completed"
    assert client.get(memory.memory_id).status == "deleted"
    assert "peanuts" not in str(client.export())
    assert client.search("peanut allergy").packets == []


def test_erase_subject_removes_everything_and_a_new_token_starts_empty(client: Any) -> None:
    client.remember("Lives in Lisbon", namespace="user/profile", field="city", value="Lisbon")
    client.threads.append(client.threads.create("chat").thread_id, "hello", role="user")
    job = client.erase_subject(wait=True)
    assert (job.status, job.kind) == ("completed", "subject")
    assert client.list().results == [] and client.threads.list().results == []  # a fresh token, a new subject


def test_export_and_health(client: Any) -> None:
    client.remember("Lives in Lisbon", namespace="user/profile", field="city", value="Lisbon")
    export = client.export()
    assert export["subject_id"] == "usr_owner" and [r["fact"]["value"] for r in export["records"]] == ["Lisbon"]
    assert client.health()["database"] == "ok"


def test_threads_events_tail_pop_and_clear(client: Any) -> None:
    thread = client.threads.create("Trip planning", key="trip-1")
    assert client.threads.create("Trip planning", key="trip-1").thread_id == thread.thread_id
    assert client.threads.get(thread.thread_id).title == "Trip planning"
    assert [t.thread_id for t in client.threads.list().results] == [thread.thread_id]

    first = client.threads.append(thread.thread_id, "Book me a flight to Lisbon", role="user", key="k1")
    assert client.threads.append(thread.thread_id, "Book me a flight to Lisbon", role="user",
                                 key="k1").event_id == first.event_id
    batch = client.threads.append_many(thread.thread_id, [
        {"kind": "message", "role": "assistant", "text": "Which date?"},
        {"kind": "tool_call", "data": {"tool": "search_flights", "tool_call_id": "c1"}},
    ])
    assert [e.seq for e in batch] == [2, 3]
    assert client.threads.event(thread.thread_id, first.event_id).text == "Book me a flight to Lisbon"
    assert [e.seq for e in client.threads.events(thread.thread_id).results] == [1, 2, 3]
    tail = client.threads.events(thread.thread_id, tail=2)
    assert ([e.seq for e in tail.results], tail.next_before) == ([2, 3], 2)

    popped = client.threads.pop(thread.thread_id)
    assert isinstance(popped, ThreadEvent) and popped.data["tool"] == "search_flights"
    deleted = client.threads.delete_event(thread.thread_id, batch[0].event_id)
    assert (deleted.status, deleted.text) == ("deleted", "")
    assert [e.seq for e in client.threads.events(thread.thread_id, status="recorded").results] == [1]

    cleared = client.threads.clear(thread.thread_id, wait=True)
    assert (cleared.up_to_seq, cleared.cleared) == (3, 1)
    assert client.deletion(cleared.deletion_id).status == "completed"
    assert client.threads.events(thread.thread_id, status="recorded").results == []
    assert client.threads.pop(thread.thread_id) is None
    assert client.threads.append(thread.thread_id, "Hello again", role="user").seq == 4


def test_summaries_checkpoints_and_tool_calls(client: Any) -> None:
    thread = client.threads.create("Refund")
    client.threads.append(thread.thread_id, "I want a refund for order 7", role="user")
    summary = client.threads.summarize(thread.thread_id)
    assert summary.source_range == {"from_seq": 1, "to_seq": 1} and summary.status == "fresh"
    mine = client.threads.add_summary(thread.thread_id, "Customer asks for a refund.", from_seq=1, to_seq=1)
    assert mine.origin == "client"
    assert client.threads.summary(thread.thread_id).summary_id in {summary.summary_id, mine.summary_id}
    assert len(client.threads.summaries(thread.thread_id)) == 2

    saved = client.threads.save_checkpoint("wf-1", version=None, thread_id=thread.thread_id, current_step="lookup")
    assert saved.version == 1
    moved = client.threads.save_checkpoint("wf-1", version=1, current_step="refund")
    assert (moved.version, client.threads.checkpoint("wf-1").current_step) == (2, "refund")
    with pytest.raises(PreconditionFailed) as stale:
        client.threads.save_checkpoint("wf-1", version=1, current_step="again")
    assert stale.value.code == "precondition_failed"

    call = client.threads.record_tool_call("wf-1", "refund-7", "refund", {"order": 7})
    assert call.status == "pending"
    assert client.threads.record_tool_call("wf-1", "refund-7", "refund", {"order": 7}).status == "pending"
    done = client.threads.complete_tool_call("wf-1", "refund-7", "succeeded", {"refund_id": "R1"})
    assert (done.status, client.threads.tool_call("wf-1", "refund-7").outcome) == ("succeeded", {"refund_id": "R1"})


def test_documents_and_procedures(client: Any, server: Any) -> None:
    from memory.identity.services import user_create
    from memory.knowledge.services import access_domain_create
    from procedures.services import procedure_publish

    access_domain_create(tenant=server.tenant, name="handbook", subject_external_ids=("usr_owner",))
    reviewer = user_create(tenant=server.tenant, username="rita", password="pw-rita-123", reviewer=True)
    procedure_publish(tenant=server.tenant, name="refunds", body="Refund up to 50 EUR at once.\n",
                      reviewer=reviewer_of(reviewer),
                      change_summary="First")

    document = client.documents.ingest("handbook", "refunds.md", "Refunds are paid within 30 days.",
                                       title="Refunds")
    assert (document.result, document.version) == ("created", 1)
    assert client.documents.ingest("handbook", "refunds.md", "Refunds are paid within 30 days.",
                                   title="Refunds").result == "unchanged"
    batch = client.documents.ingest_many([{"access_domain": "handbook", "external_id": "faq.md", "title": "FAQ",
                                           "text": "Questions people ask."}])
    assert batch["stored"] == 1
    assert client.documents.get(document.document_id).chunks
    assert {d.external_id for d in client.documents.list(access_domain="handbook").results} == {"refunds.md", "faq.md"}
    assert client.documents.delete(document.document_id).deletion_id

    assert [p.name for p in client.procedures.list()] == ["refunds"]
    current = client.procedures.get("refunds")
    assert (current.version, current.body) == (1, "Refund up to 50 EUR at once.\n")
    assert client.procedures.get("refunds", 1).approved_by == "rita"
    assert [v.version for v in client.procedures.versions("refunds")] == [1]
    proposal = client.procedures.propose("refunds", "Refund up to 80 EUR at once.\n", rationale="Policy change")
    assert (proposal.status, proposal.base_version) == ("pending", 1)
    assert client.procedures.proposal("refunds", proposal.proposal_id).proposal_id == proposal.proposal_id
    assert [p.proposal_id for p in client.procedures.proposals("refunds")] == [proposal.proposal_id]


def test_errors_carry_code_detail_and_status(client: Any, server: Any) -> None:
    with pytest.raises(SecretDetected) as secret:
        client.remember("My password is hunter2-secret", namespace="user/profile", field="note")
    assert (secret.value.status, secret.value.code) == (422, "secret_detected")
    assert "hunter2" not in secret.value.detail
    with pytest.raises(PolicyRefused) as refused:
        client.remember("Probably likes jazz", namespace="user/inferred", field="music")
    assert refused.value.code == "class_not_allowed"
    with pytest.raises(InvalidRequest) as invalid:
        client.remember("x", namespace=["User"], field="f")
    assert invalid.value.code == "invalid" and invalid.value.errors
    with pytest.raises(NotFound):
        client.get("mem_01H00000000000000000000000")


def test_another_principal_sees_nothing_of_the_owner(client: Any, other: Engram) -> None:
    memory = client.remember("Prefers aisle seats", namespace=PREFS, field="seat_preference", value="aisle")
    thread = client.threads.create("Private")
    with pytest.raises(NotFound):
        other.get(memory.memory_id)
    with pytest.raises(NotFound):
        other.fact("user/travel_preferences", "seat_preference")
    with pytest.raises(NotFound):
        other.forget(memory.memory_id)
    with pytest.raises(NotFound):
        other.threads.events(thread.thread_id)
    assert other.list().results == [] and other.search("aisle seats").packets == []
    assert client.get(memory.memory_id).status == "active"


def test_credentials_a_given_token_a_minted_one_and_refusals(server: Any) -> None:
    token = server.token("usr_owner")
    with Engram(server.url, api_key=server.key, principal_token=token) as given:
        given.remember("Speaks Portuguese", namespace="user/profile", field="language", value="pt")
    with server.client("usr_owner", token_ttl=5) as minting:
        assert minting.fact("user/profile", "language").value == "pt"
        first_mint = minting.credentials.issued_at
        minting.credentials.expires_at = None  # as if it were about to expire: the next call mints anew
        minting.fact("user/profile", "language")
        assert minting.credentials.issued_at != first_mint and minting.credentials.expires_at is not None
        other = minting.mint_token("usr_other", ttl=60)
        assert other.subject_id == "usr_other" and other.token.startswith("ept_")
        named = minting.mint_token("usr_other", ttl=60, display_name="Otto Other")
        assert named.display_name == "Otto Other"
    with pytest.raises(AuthenticationFailed) as bad_key:
        Engram(server.url, api_key="egk_wrong", principal_token=token).list()
    assert bad_key.value.code == "invalid_key"
    read_only = server.key_with("read")
    with pytest.raises(PermissionDenied) as no_write:
        Engram(server.url, api_key=read_only, principal_token=token).remember(
            "x", namespace="user/profile", field="f")
    assert no_write.value.code == "insufficient_scope"
    with pytest.raises(PermissionDenied):  # a key without the mint scope cannot act for a subject_id
        Engram(server.url, api_key=read_only, subject_id="usr_owner").list()


def test_a_write_whose_answer_was_lost_is_retried_with_the_same_key(server: Any) -> None:
    """The first attempt reaches the server but the client never hears back; the retry carries the same
    event id, so one record exists."""
    real = httpx.HTTPTransport()
    sent: list[bytes] = []

    class LosesFirstAnswer(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = real.handle_request(request)
            if request.url.path.endswith("/memories") and request.method == "POST":
                sent.append(request.content)
                if len(sent) == 1:
                    response.read()
                    raise httpx.ReadTimeout("answer lost", request=request)
            return response

    with Engram(server.url, api_key=server.key, subject_id="usr_owner", transport=LosesFirstAnswer()) as flaky:
        memory = flaky.remember("Prefers trains", namespace="user/profile", field="transport", value="train")
        assert len(sent) == 2 and sent[0] == sent[1]
        assert [m.memory_id for m in flaky.list().results] == [memory.memory_id]


def test_a_key_without_read_records_a_tool_calls_outcome_and_gets_only_what_it_sent(server: Any) -> None:
    server.client().threads.record_tool_call("wf-2", "pay-1", "pay", {"amount": 12})
    writer = Engram(server.url, api_key=server.key_with("write", "mint"), subject_id="usr_owner", retries=1)

    done = writer.threads.complete_tool_call("wf-2", "pay-1", "succeeded", {"paid": True})

    assert (done.status, done.outcome, done.tool, done.arguments) == ("succeeded", {"paid": True}, "", {})
    assert server.client().threads.tool_call("wf-2", "pay-1").arguments == {"amount": 12}
