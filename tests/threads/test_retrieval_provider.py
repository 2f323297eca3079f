"""include: ["summaries"]: fresh summaries of the principal's subject, ranked by full-text search."""

from __future__ import annotations

import pytest

from memory.retrieval.sources import RetrievalQuery, provider
from memory.threads.retrieval_provider import summaries_search
from tests.threads.conftest import agent_scope, append, new_thread

pytestmark = pytest.mark.django_db


def query(text, **filters):
    return RetrievalQuery(text=text, vector=[], limit=10, filters=filters)


@pytest.fixture
def summarized(agent):
    lisbon = new_thread(agent, "Lisbon")
    append(agent, lisbon, "I need a flight to Lisbon in May.")
    append(agent, lisbon, "Booked TP1234 to Lisbon.", role="assistant")
    rome = new_thread(agent, "Rome")
    append(agent, rome, "Find me a hotel in Rome near the station.")
    return {
        "lisbon": lisbon, "rome": rome,
        "lisbon_summary": agent.post(f"/api/v1/threads/{lisbon}/summarize", {}).json(),
        "rome_summary": agent.post(f"/api/v1/threads/{rome}/summarize", {}).json(),
    }


def test_the_provider_is_registered_under_summaries():
    assert provider("summaries") is summaries_search


def test_it_returns_matching_fresh_summaries_as_packets_with_their_source_range(agent, summarized):
    items = summaries_search(agent_scope(agent), query("flights to lisbon"))

    assert [i.item_id for i in items] == [summarized["lisbon_summary"]["summary_id"]]
    item = items[0]
    assert item.source == "summaries" and item.lexical_rank == 1 and item.authority == "summary"
    assert item.packet["kind"] == "summary"
    assert item.packet["thread_id"] == summarized["lisbon"]
    assert item.packet["summary_id"] == summarized["lisbon_summary"]["summary_id"]
    assert item.packet["source_range"] == {"from_seq": 1, "to_seq": 2}
    assert item.packet["status"] == "fresh"
    assert "TP1234" in item.text


def test_any_query_word_matches_and_better_matches_rank_first(agent, summarized):
    items = summaries_search(agent_scope(agent), query("hotel lisbon station rome"))

    assert [i.item_id for i in items] == [summarized["rome_summary"]["summary_id"],
                                          summarized["lisbon_summary"]["summary_id"]]
    assert [i.lexical_rank for i in items] == [1, 2]


def test_a_thread_filter_narrows(agent, summarized):
    items = summaries_search(agent_scope(agent), query("lisbon rome", thread_id=summarized["rome"]))

    assert [i.packet["thread_id"] for i in items] == [summarized["rome"]]


def test_a_stale_summary_is_out_of_retrieval_at_once(agent, summarized):
    event_id = agent.get(f"/api/v1/threads/{summarized['lisbon']}/events").json()["results"][1]["event_id"]
    agent.delete(f"/api/v1/threads/{summarized['lisbon']}/events/{event_id}")

    assert summaries_search(agent_scope(agent), query("lisbon")) == []


def test_other_subjects_and_tenants_see_nothing(agent, outsider, foreign_agent, summarized):
    assert summaries_search(agent_scope(outsider), query("lisbon")) == []
    assert summaries_search(agent_scope(foreign_agent), query("lisbon")) == []


def test_an_empty_query_returns_nothing(agent, summarized):
    assert summaries_search(agent_scope(agent), query("  ?! ")) == []



def test_the_semantic_leg_finds_a_paraphrase_once_the_summary_is_embedded(agent, summarized):
    from memory.embedder import get_embedder
    from memory.threads.tasks import embed_summaries

    ids = [summarized["lisbon_summary"]["summary_id"], summarized["rome_summary"]["summary_id"]]
    assert embed_summaries(ids) == 2
    assert embed_summaries(ids) == 0  # idempotent
    text = "accommodation close to the railway terminal"  # no word in common with either summary
    vector = get_embedder().embed_query(text)

    items = summaries_search(agent_scope(agent), RetrievalQuery(text=text, vector=vector, limit=10))

    best = min(items, key=lambda i: i.semantic_rank)
    assert best.item_id == summarized["rome_summary"]["summary_id"]
    assert best.lexical_rank is None and best.semantic_similarity > 0.2
    assert summaries_search(agent_scope(outsider_scope(agent)), RetrievalQuery(text=text, vector=vector,
                                                                                limit=10)) == []


def test_deletion_clears_the_derived_embedding(agent, summarized):
    from memory.threads.models import Summary
    from memory.threads.tasks import embed_summaries

    summary_id = summarized["lisbon_summary"]["summary_id"]
    embed_summaries([summary_id])
    event_id = agent.get(f"/api/v1/threads/{summarized['lisbon']}/events").json()["results"][0]["event_id"]

    agent.delete(f"/api/v1/threads/{summarized['lisbon']}/events/{event_id}")

    assert Summary.objects.get(pk=summary_id).embedding is None


def outsider_scope(agent):
    from memory.identity.services import subject_get_or_create

    other = subject_get_or_create(tenant=agent.tenant, external_id="usr_other")
    return type(agent)(client=agent.client, key=agent.key, token=None, tenant=agent.tenant, subject=other)


def test_the_provider_runs_one_query_per_leg(agent, summarized, django_assert_num_queries):
    scope = agent_scope(agent)
    with django_assert_num_queries(2):
        summaries_search(scope, RetrievalQuery(text="lisbon", vector=[0.1] * 384, limit=10))
    with django_assert_num_queries(1):
        summaries_search(scope, query("lisbon"))
