"""Context windows of episodic records: derived by the worker after a write, used by both legs, rebuilt by
reembed, and purged by deletion with every window that quoted the deleted turn."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from django.core.management import call_command

from memory.retrieval.context import SESSION_GAP_MINUTES, WINDOW
from memory.retrieval.models import RecordContext
from tests.deletion.helpers import run_job, tables_containing
from tests.retrieval.conftest import retrieve

pytestmark = pytest.mark.django_db

MARKER = "qzvwindow4417"
CONVERSATION = [
    ("2026-05-02T18:00:00Z", "Lea: Do you still go swimming at the lake before work?"),
    ("2026-05-02T18:00:00Z", "Sam: Yes, every Sunday morning, even when the water is cold!"),
    ("2026-05-02T18:00:00Z", "Lea: Brave. I only managed to fix my bike this week."),
    ("2026-05-02T18:00:00Z", f"Sam: My cousin {MARKER} helped me repaint the kitchen."),
    ("2026-05-02T18:00:00Z", "Lea: The kitchen looked great in your photos."),
    # A new session weeks later: never part of the windows above.
    ("2026-06-20T09:00:00Z", "Sam: We finally booked the flights to Porto for August."),
    ("2026-06-20T09:00:00Z", "Lea: Porto in August will be hot, take a hat."),
]


def _turn(n: int, at: str, text: str) -> dict:
    return {"namespace": ["user", "conversation"], "kind": "conversation_turn", "type": "episodic",
            "fact": {"field": f"turn_{n}", "value": text}, "text": text,
            "source": {"type": "explicit_user_statement", "event_id": f"evt_turn_{n}", "occurred_at": at}}


@pytest.fixture
def conversation(agent, sync_tasks, django_capture_on_commit_callbacks):
    """The turns written in two batches (the second batch extends the windows of the first), worker run."""
    items = [_turn(n, at, text) for n, (at, text) in enumerate(CONVERSATION)]
    ids = []
    for chunk in (items[:2], items[2:]):
        with django_capture_on_commit_callbacks(execute=True):
            response = agent.post("/api/v1/memories/batch", {"items": chunk})
        assert response.status_code == 200, response.json()
        ids += [r["record"]["memory_id"] for r in response.json()["results"]]
    return ids


def test_the_worker_derives_each_turns_window_within_its_session(conversation):
    windows = {c.record_id: c for c in RecordContext.objects.all()}

    assert set(windows) == set(conversation)
    assert windows[conversation[0]].neighbours == conversation[:3]  # the first turn: itself and two after
    assert windows[conversation[2]].neighbours == conversation[:5]  # written in the second batch, sees the first
    assert windows[conversation[1]].neighbours == conversation[:4]  # extended when the second batch arrived
    assert windows[conversation[5]].neighbours == conversation[5:]  # a new session starts after a long pause
    assert all(c.embedding is not None for c in windows.values())


def test_a_turn_that_only_makes_sense_with_its_neighbours_is_found(agent, conversation):
    packets = retrieve(agent, "How often does Sam go swimming?", limit=3)["packets"]

    assert conversation[1] in [p["memory_id"] for p in packets]  # "Yes, every Sunday morning..."


def test_a_word_said_only_around_a_turn_is_lexical_evidence_for_it_at_the_windows_weight(agent, conversation):
    body = retrieve(agent, MARKER, limit=5)
    log = agent.get(f"/api/v1/retrievals/{body['retrieval_id']}").json()
    lexical = {c["memory_id"]: c["lexical"] for c in log["candidates"]}

    said, around = lexical[conversation[3]], lexical[conversation[4]]  # the turn that says it; the next one
    assert said > around > 0  # "The kitchen looked great in your photos." has the word in its window only
    assert conversation[2] in lexical and lexical[conversation[2]] > 0  # so has the turn before
    assert conversation[6] not in lexical or lexical[conversation[6]] is None  # another session: no window


def test_a_batch_with_turns_queues_one_task_that_embeds_every_record_and_derives_the_windows(
        agent, django_capture_on_commit_callbacks):
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    from memory.models import MemoryRecord
    from memory.records import tasks
    from tests.conftest import memory_body

    # A preference among the turns: it has no window, but still needs its own vector.
    items = [_turn(n, at, text) for n, (at, text) in enumerate(CONVERSATION[:4])]
    items.append(memory_body(text="Prefers aisle seats", fact={"field": "seat", "value": "aisle"},
                             source={"type": "explicit_user_statement", "event_id": "evt_seat"}))
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.post("/api/v1/memories/batch", {"items": items}).status_code == 200

    packages = [SignedPackage.loads(row.payload) for row in OrmQ.objects.all()]
    assert [p["func"] for p in packages] == ["memory.records.tasks.derive_context"]
    tasks.derive_context(*packages[0]["args"])  # what the worker runs

    assert not MemoryRecord.objects.filter(embedding__isnull=True).exists()
    assert RecordContext.objects.count() == 4
    assert agent.get("/api/v1/health").json()["derived_pending"] == 0


def test_semantic_facts_get_no_window(agent, remember):
    remember(agent, "Prefers aisle seats", field="seat")
    remember(agent, "Lives in Lisbon", field="home")

    assert not RecordContext.objects.exists()


def test_reembed_rebuilds_the_windows_and_a_second_run_writes_nothing(conversation, capsys):
    RecordContext.objects.all().delete()

    call_command("reembed")
    assert RecordContext.objects.count() == len(CONVERSATION)
    call_command("reembed")

    assert "context windows written: 0" in capsys.readouterr().out


def test_deleting_a_turn_purges_every_window_that_quoted_it_and_rebuilds_them_without_it(agent, conversation):
    assert any(t.startswith("retrieval_recordcontext") for t in tables_containing(MARKER))
    deleted = conversation[3]

    response = agent.delete(f"/api/v1/memories/{deleted}")

    assert run_job(response.json()["deletion_id"]) == "completed"
    assert tables_containing(MARKER) == []
    windows = {c.record_id: c.neighbours for c in RecordContext.objects.all()}
    assert deleted not in windows and all(deleted not in n for n in windows.values())
    assert windows[conversation[4]] == [conversation[1], conversation[2], conversation[4]]  # rebuilt, live turns


def _blends(ids: list[str]) -> dict:
    """Each record's own and blended vectors (None where it has none)."""
    import numpy as np

    from memory.models import MemoryRecord

    def array(vector):
        return None if vector is None else np.array(vector)

    return {r.pk: (array(r.embedding), array(r.blended_embedding)) for r in MemoryRecord.objects.filter(pk__in=ids)}


def _assert_blended_as_scored(ids: list[str]) -> None:
    """Each windowed turn's blended vector is its own and its window's unit vectors in the semantic leg's
    proportions, so that its inner product with a query is the similarity the statement gives the turn."""
    import numpy as np

    from memory.models import MemoryRecord
    from memory.retrieval.candidates import OWN_WEIGHT

    contexts = RecordContext.objects.filter(record_id__in=ids)
    windows = {c.record_id: np.array(c.embedding) for c in contexts}
    # The window's lexemes are on the turn's row too (the statement reads them there), exactly the window's.
    assert (dict(MemoryRecord.objects.filter(pk__in=ids).values_list("pk", "context_terms"))
            == {i: dict(contexts.values_list("record_id", "terms")).get(i) for i in ids})
    query = np.random.default_rng(7).normal(size=384)
    for record_id, (own, blended) in _blends(ids).items():
        if record_id not in windows:
            assert blended is None
            continue
        own, window = own / np.linalg.norm(own), windows[record_id] / np.linalg.norm(windows[record_id])
        assert np.allclose(blended, OWN_WEIGHT * own + (1 - OWN_WEIGHT) * window, atol=1e-5)
        assert np.isclose(blended @ query, OWN_WEIGHT * own @ query + (1 - OWN_WEIGHT) * window @ query, atol=1e-4)


def test_each_windowed_turn_carries_its_windows_vector_and_words_and_a_deletion_derives_its_neighbours_again(
        agent, conversation, remember):
    import numpy as np

    from memory.models import MemoryRecord

    fact = remember(agent, "Prefers aisle seats", field="seat")
    assert MemoryRecord.objects.filter(context_terms=MARKER).count() == 3  # the turns whose windows quote it
    _assert_blended_as_scored(conversation)
    assert all(blended is not None for _, blended in _blends(conversation).values())
    assert _blends([fact])[fact][1] is None  # no window, no blend: its own vector stands
    before = _blends(conversation)

    deleted = conversation[3]
    assert run_job(agent.delete(f"/api/v1/memories/{deleted}").json()["deletion_id"]) == "completed"

    after = _blends(conversation)
    assert after[deleted] == (None, None)
    assert not np.allclose(after[conversation[4]][1], before[conversation[4]][1])  # its window lost the turn
    _assert_blended_as_scored([i for i in conversation if i != deleted])
    assert not MemoryRecord.objects.filter(context_terms=MARKER).exists()  # no copy of its words is left



def test_the_deletion_read_check_finds_a_copy_of_a_windows_words_left_without_its_window(agent, conversation):
    from memory.deletion.registry import DeletionTarget, read_checks
    from memory.models import MemoryRecord

    deleted, neighbour = conversation[3], conversation[4]
    target = DeletionTarget(tenant_id=agent.tenant.pk, subject_id=agent.subject.pk,
                            subject_external_id=agent.subject.external_id, memory_ids=(deleted,), markers=(MARKER,))
    check = read_checks()["context_windows"]
    RecordContext.objects.filter(record_id__in=conversation[1:5]).exclude(record_id=neighbour).delete()
    MemoryRecord.objects.filter(pk__in=conversation[1:5]).exclude(pk=neighbour).update(context_terms=None)
    assert check(target) == [f"context window of {neighbour}"]

    # A purge that dropped the window but left the copy on the turn's row: the words are still there.
    RecordContext.objects.filter(record_id=neighbour).delete()
    assert check(target) == [f"window lexemes of {neighbour}"]


def _expected_windows(turns: list[tuple[str, dt.datetime]]) -> dict[str, list[str]]:
    """The windows by their definition, over the whole stream at once: event order, sessions cut at gaps longer
    than SESSION_GAP_MINUTES, up to WINDOW turns on either side within the session."""
    ordered = sorted(turns, key=lambda t: t[1])
    sessions: list[list[str]] = []
    for n, (record_id, at) in enumerate(ordered):
        if n == 0 or at - ordered[n - 1][1] > dt.timedelta(minutes=SESSION_GAP_MINUTES):
            sessions.append([])
        sessions[-1].append(record_id)
    windows = {}
    for session in sessions:
        for i, record_id in enumerate(session):
            window = session[max(0, i - WINDOW):i + WINDOW + 1]
            if len(window) > 1:
                windows[record_id] = window
    return windows


def test_windows_derived_batch_by_batch_in_any_order_equal_the_whole_streams(agent, sync_tasks,
                                                                               django_capture_on_commit_callbacks):
    # 60 turns in sessions of uneven length, written in shuffled batches: each batch's windows are derived from
    # the turns around it alone, and must come out as if the whole conversation had been read at once.
    rng = random.Random(7)
    start = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
    times, at = [], start
    for _ in range(60):
        pause = rng.choice([5, 30]) * 60 if rng.random() < 0.15 else rng.randint(1, 9)
        at += dt.timedelta(minutes=pause)
        times.append(at)
    items = [_turn(100 + n, t.isoformat(), f"Turn {n} of the long chat about topic {n % 7}")
             for n, t in enumerate(times)]
    order = list(range(60))
    rng.shuffle(order)
    written: dict[int, str] = {}
    for chunk_start in range(0, 60, 13):
        chunk = order[chunk_start:chunk_start + 13]
        with django_capture_on_commit_callbacks(execute=True):
            response = agent.post("/api/v1/memories/batch", {"items": [items[n] for n in chunk]})
        assert response.status_code == 200, response.json()
        written.update(zip(chunk, (r["record"]["memory_id"] for r in response.json()["results"]), strict=True))

    expected = _expected_windows([(written[n], times[n]) for n in range(60)])
    assert {c.record_id: c.neighbours for c in RecordContext.objects.all()} == expected


def _weighted_turns(ids: list[str]) -> dict:
    """Each turn's stored vector and its weight: its length in the model's tokens, with the two markers."""
    import numpy as np

    from memory.embedder import get_embedder
    from memory.models import MemoryRecord

    return {r.pk: (np.array(r.embedding), get_embedder().count_tokens(r.text) + 2)
            for r in MemoryRecord.objects.filter(pk__in=ids)}


def _assert_token_weighted_means(windows, turns: dict) -> None:
    import numpy as np

    for window in windows:
        total = sum(weight * vector for vector, weight in (turns[i] for i in window.neighbours))
        stored = np.array(window.embedding)  # only its direction is read (cosine distance)
        assert np.allclose(stored / np.linalg.norm(stored), total / np.linalg.norm(total), atol=1e-5)


def test_by_default_a_window_is_the_token_weighted_mean_of_its_turns_and_still_finds_the_answer(
        agent, sync_tasks, django_capture_on_commit_callbacks):


    items = [_turn(200 + n, at, text) for n, (at, text) in enumerate(CONVERSATION)]
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post("/api/v1/memories/batch", {"items": items})
    ids = [r["record"]["memory_id"] for r in response.json()["results"]]

    turns = _weighted_turns(ids)
    assert len({weight for _, weight in turns.values()}) > 1  # the turns differ in length: the weights matter
    windows = RecordContext.objects.all()
    assert len(windows) == len(ids)
    _assert_token_weighted_means(windows, turns)
    packets = retrieve(agent, "How often does Sam go swimming?", limit=3)["packets"]
    assert ids[1] in [p["memory_id"] for p in packets]


def test_with_model_vectors_a_window_is_the_models_embedding_of_its_text(
        agent, settings, sync_tasks, django_capture_on_commit_callbacks):
    import numpy as np

    from memory.embedder import get_embedder
    from memory.models import MemoryRecord

    settings.ENGRAM_CONTEXT_VECTOR = "model"
    items = [_turn(300 + n, at, text) for n, (at, text) in enumerate(CONVERSATION)]
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post("/api/v1/memories/batch", {"items": items})
    ids = [r["record"]["memory_id"] for r in response.json()["results"]]

    texts = dict(MemoryRecord.objects.filter(pk__in=ids).values_list("pk", "text"))
    windows = list(RecordContext.objects.all())
    assert len(windows) == len(ids)
    expected = get_embedder().embed(["\n".join(texts[i] for i in w.neighbours) for w in windows])
    for window, vector in zip(windows, expected, strict=True):
        assert np.allclose(np.array(window.embedding), vector, atol=1e-4)
    # The turns got their own vectors before their windows, so every windowed turn has its blended vector too.
    _assert_blended_as_scored(ids)
    assert all(blended is not None for _, blended in _blends(ids).values())
    packets = retrieve(agent, "How often does Sam go swimming?", limit=3)["packets"]
    assert ids[1] in [p["memory_id"] for p in packets]


def test_a_window_reaching_turns_whose_vectors_are_pending_is_derived_from_the_others_and_again_later(
        agent, sync_tasks, django_capture_on_commit_callbacks):

    from memory.models import MemoryRecord

    items = [_turn(400 + n, at, text) for n, (at, text) in enumerate(CONVERSATION[:5])]
    with django_capture_on_commit_callbacks() as first_tasks:  # the first turns' tasks have not run yet
        first = agent.post("/api/v1/memories/batch", {"items": items[:2]}).json()["results"]
    with django_capture_on_commit_callbacks(execute=True):
        later = agent.post("/api/v1/memories/batch", {"items": items[2:]}).json()["results"]
    ids = [r["record"]["memory_id"] for r in first + later]

    assert not MemoryRecord.objects.filter(pk__in=ids[:2], embedding__isnull=False).exists()
    reaching = RecordContext.objects.get(record_id=ids[2])
    assert reaching.neighbours == ids and reaching.embedding is not None  # from the three turns with a vector

    for callback in first_tasks:
        callback()
    _assert_token_weighted_means(RecordContext.objects.filter(record_id__in=ids), _weighted_turns(ids))
