"""/me/ at scale: full-text search, filters and pages in SQL, inside the person's own scope; bulk delete."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.deletion.models import DeletionJob
from memory.models import MemoryRecord
from review.me import PAGE_SIZE
from tests.deletion.helpers import run_job
from tests.me.helpers import subject_of, write_many

pytestmark = pytest.mark.django_db

N = 240  # 60 per topic, 120 per namespace, 48 bookings


@pytest.fixture
def mine(agent, alice):
    return write_many(subject_of(agent), N)


@pytest.fixture
def bobs(outsider, bob):
    return write_many(subject_of(outsider), 40, tag="bob")


def ids_on(html: str) -> list[str]:
    return re.findall(r'<tr id="row-(mem_[0-9A-Z]+)"', html)


def total(html: str) -> int:
    return int(re.search(r'<p id="summary"[^>]*>(\d+) memor', html).group(1))


def test_it_searches_my_memories_with_full_text_and_never_anyone_elses(client, alice, mine, bobs):
    client.force_login(alice)

    html = client.get("/me/", {"q": "hotels"}).content.decode()

    assert total(html) == N // 4
    shown = MemoryRecord.objects.filter(pk__in=ids_on(html))
    assert len(shown) == PAGE_SIZE and all("hotels" in r.text for r in shown)
    assert {r.subject_id for r in shown} == {subject_of_alice(alice)}
    assert "about hotels bob" not in html  # bob's records say so; none is listed


def subject_of_alice(alice) -> int:
    return alice.subjects.get().pk


def test_every_word_must_match_and_a_word_may_be_a_prefix(client, alice, mine):
    client.force_login(alice)

    assert total(client.get("/me/", {"q": "meet"}).content.decode()) == N // 4  # "meet" finds "meetings"
    assert total(client.get("/me/", {"q": "Number MEETINGS"}).content.decode()) == N // 4
    assert "No memory matches" in client.get("/me/", {"q": "hotels meals"}).content.decode()


@pytest.mark.parametrize("q", ["'); DROP TABLE x; --", ":*&|!()<>\\", "\"unclosed", "a:* | b", "-", "ä" * 200])
def test_any_search_text_is_an_answer_never_an_error(client, alice, mine, q):
    client.force_login(alice)

    assert client.get("/me/", {"q": q}).status_code == 200


def test_it_filters_by_namespace_status_and_source(client, alice, mine):
    client.force_login(alice)

    assert total(client.get("/me/", {"namespace": "episodes"}).content.decode()) == N // 2
    assert total(client.get("/me/", {"namespace": "user"}).content.decode()) == N // 2  # a parent namespace
    assert total(client.get("/me/", {"source": "system_of_record"}).content.decode()) == N // 5
    assert total(client.get("/me/", {"source": "system_of_record", "q": "flights"}).content.decode()) == 12
    assert total(client.get("/me/", {"status": "active"}).content.decode()) == N
    assert total(client.get("/me/", {"status": "superseded"}).content.decode()) == 0
    booking = client.get("/me/", {"source": "system_of_record"}).content.decode()
    assert booking.count("From the booking system") == N // 5 and '<span class="lead">You said' not in booking


def test_an_unknown_filter_value_is_ignored_with_a_note(client, alice, mine):
    client.force_login(alice)

    html = client.get("/me/", {"namespace": "somebody/else", "status": "nonsense"}).content.decode()

    assert total(html) == N and "were not understood" in html


def test_pages_are_server_side_in_a_stable_order_and_work_without_javascript(client, alice, mine):
    client.force_login(alice)
    expected = list(MemoryRecord.objects.filter(pk__in=mine).order_by("-created_at", "-pk")
                    .values_list("pk", flat=True))

    pages = [ids_on(client.get("/me/", {"page": n}).content.decode()) for n in range(1, 6)]

    assert [len(p) for p in pages] == [50, 50, 50, 50, 40]
    assert sum(pages, []) == expected
    first = client.get("/me/").content.decode()
    assert 'href="?page=2"' in first and 'rel="next"' in first and "Page 1 of 5" in first
    assert ids_on(client.get("/me/", {"page": 99}).content.decode()) == pages[-1]  # past the end: the last page
    searched = client.get("/me/", {"q": "hotels", "page": 2}).content.decode()
    assert 'href="?q=hotels&amp;page=1"' in searched  # paging keeps the search


def test_htmx_gets_the_results_alone(client, alice, mine):
    client.force_login(alice)

    html = client.get("/me/", {"q": "hotels"}, HTTP_HX_REQUEST="true").content.decode()

    assert "<html" not in html and '<p id="summary"' in html and len(ids_on(html)) == PAGE_SIZE


def test_a_page_costs_the_same_queries_with_many_memories(client, alice, agent):
    client.force_login(alice)
    write_many(subject_of(agent), 30)
    with CaptureQueriesContext(connection) as few:
        client.get("/me/", {"q": "hotels"})
    write_many(subject_of(agent), 600, tag="more")
    with CaptureQueriesContext(connection) as many:
        client.get("/me/", {"q": "hotels"})

    assert len(many) == len(few)
    searches = [q["sql"] for q in many.captured_queries if "@@" in q["sql"]]
    assert searches and all('"tenant_id" =' in sql and '"subject_id" =' in sql for sql in searches)
    assert all("to_tsquery" in sql for sql in searches)


def test_bulk_delete_asks_first_then_starts_one_job_per_memory(client, alice, mine):
    client.force_login(alice)
    chosen = ids_on(client.get("/me/").content.decode())[:3]

    confirm = client.post("/me/delete-selected", {"ids": chosen})
    assert confirm.status_code == 200 and "Delete 3 memories?" in confirm.content.decode()
    assert not DeletionJob.objects.exists()

    done = client.post("/me/delete-selected", {"ids": chosen, "confirm": "yes"})

    assert done.status_code == 302 and done["Location"].startswith("/me/deletions/")
    jobs = DeletionJob.objects.order_by("memory_id")
    assert sorted(j.memory_id for j in jobs) == sorted(chosen)
    assert {j.requested_by for j in jobs} == {f"user:{alice.pk}"}
    listing = client.get("/me/").content.decode()
    assert listing.count('<tr id="row-mem') == PAGE_SIZE
    assert listing.count('class="memory-row" data-status="deleting"') == 3
    page = client.get(done["Location"]).content.decode()
    assert page.count('class="deletion"') == 3 and 'hx-trigger="every 2s"' in page and ">Waiting</span>" in page
    for job in jobs:
        assert run_job(job.pk) == "completed"
    page = client.get(done["Location"]).content.decode()
    assert page.count(">Completed</span>") == 4 and "hx-trigger" not in page  # 3 rows + the count
    assert total(client.get("/me/").content.decode()) == N - 3


def test_bulk_delete_of_someone_elses_memories_deletes_nothing(client, alice, bob, mine):
    client.force_login(bob)

    assert client.post("/me/delete-selected", {"ids": mine[:2]}).status_code == 404
    client.post("/me/delete-selected", {"ids": mine[:2], "confirm": "yes"})

    assert not DeletionJob.objects.exists()
