"""Re-ingest replaces a document's chunks atomically: no retrieval ever sees old and new together."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory.embedder import get_embedder
from memory.knowledge.models import Chunk
from memory.knowledge.services import DocumentInput, document_ingest, operator_scope
from memory.retrieval.sources import RetrievalQuery, provider
from tests.knowledge.conftest import scope_for

QUERY = "escalation procedure for the on-call rotation"


def version_text(version: int, paragraphs: int) -> str:
    # Long enough for several chunks; every chunk names its version, so a mix is visible.
    return "\n\n".join(
        f"Version {version} marker v{version}x. Part {p}: the escalation procedure for the on-call rotation says "
        f"page the secondary after {p + version} minutes, then the team lead, then the incident commander."
        for p in range(paragraphs))


@pytest.mark.django_db(transaction=True)
def test_no_retrieval_sees_a_mix_of_versions_during_reingest(tenant, make_domain, agent):
    domain = make_domain(tenant, "oncall")
    scope, op = scope_for(agent), operator_scope(tenant)

    def ingest(version: int) -> None:
        # Each version has a different number of chunks, so a half-swapped state is also detectable by count.
        document_ingest(scope=op, domain=domain, item=DocumentInput(
            access_domain="oncall", external_id="escalation.md", title="Escalation",
            text=version_text(version, paragraphs=12 + 3 * (version % 3))))

    ingest(1)
    expected_counts = {}
    expected_counts[1] = Chunk.objects.count()
    assert expected_counts[1] > 2
    search = provider("knowledge")
    assert search is not None
    query = RetrievalQuery(text=QUERY, vector=get_embedder().embed_query(QUERY), limit=200)
    observed: list[tuple[set[int], int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                items = search(scope, query)
                observed.append(({i.packet["version"] for i in items}, len(items)))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for version in range(2, 12):
            ingest(version)
            expected_counts[version] = Chunk.objects.count()
    finally:
        stop.set()
        thread.join(timeout=60)

    assert not errors, errors
    assert len(observed) > 20, "the reader should have run many retrievals during the re-ingests"
    assert all(len(versions) == 1 for versions, _ in observed), [v for v, _ in observed if len(v) != 1][:3]
    seen_versions = {next(iter(v)) for v, _ in observed}
    assert len(seen_versions) > 2, "the reader should have seen several versions come and go"
    for versions, count in observed:
        assert count == expected_counts[next(iter(versions))]  # every chunk of that version, never a part
    assert set(Chunk.objects.values_list("document__version", flat=True)) == {11}


@pytest.mark.django_db(transaction=True)
def test_twin_first_posts_store_one_document(tenant, make_domain, agent):
    domain = make_domain(tenant, "oncall")
    op = operator_scope(tenant)
    item = DocumentInput(access_domain="oncall", external_id="twin.md", title="Twin", text=version_text(1, 2))
    statuses: list[str] = []
    barrier = threading.Barrier(2)

    def post() -> None:
        try:
            barrier.wait()
            statuses.append(document_ingest(scope=op, domain=domain, item=item).status)
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert sorted(statuses) == ["created", "unchanged"]
    from memory.knowledge.models import Document

    assert Document.objects.filter(external_id="twin.md").count() == 1
    assert Chunk.objects.count() == Chunk.objects.filter(document__external_id="twin.md", document__version=1).count()
