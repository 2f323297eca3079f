"""Query counts do not grow with the number of documents or chunks (no per-row loops)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.knowledge.conftest import doc_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/documents"


def _count(fn) -> int:
    with CaptureQueriesContext(connection) as queries:
        fn()
    return len(queries)


def test_listing_documents_takes_the_same_queries_for_one_or_many(agent, handbook):
    agent.post(URL, doc_body(external_id="first"))
    one = _count(lambda: agent.get(URL))
    for n in range(6):
        agent.post(URL, doc_body(external_id=f"more-{n}", text=f"Text number {n}."))

    many = _count(lambda: agent.get(URL))

    assert len(agent.get(URL).json()["results"]) == 7
    assert many == one


def test_deleting_takes_the_same_queries_for_a_short_or_a_long_document(agent, handbook):
    warm_id = agent.post(URL, doc_body(external_id="warm-up")).json()["document_id"]
    agent.delete(f"{URL}/{warm_id}")  # the first deletion loads what is loaded once per process
    short_id = agent.post(URL, doc_body(external_id="short")).json()["document_id"]
    long_text = "\n\n".join(f"Paragraph {i} of a long manual about refund exceptions." for i in range(80))
    long_id = agent.post(URL, doc_body(external_id="long", text=long_text)).json()["document_id"]

    short = _count(lambda: agent.delete(f"{URL}/{short_id}"))
    long = _count(lambda: agent.delete(f"{URL}/{long_id}"))

    assert long == short
