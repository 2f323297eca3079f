"""A document too large to embed in the request is found lexically at once, semantically after the worker."""

from __future__ import annotations

import pytest

from memory.knowledge.models import Chunk
from tests.conftest import wait_for
from tests.knowledge.conftest import doc_body, search

URL = "/api/v1/documents"
TEXT = "\n\n".join(
    f"Section {i}: the Osprey data-retention runbook keeps nightly snapshots for {i + 7} days before pruning them."
    for i in range(30))


@pytest.mark.worker
def test_a_large_document_is_embedded_by_a_real_worker_after_commit(transactional_db, settings, agent, handbook,
                                                                     request):
    settings.ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS = 2

    body = agent.post(URL, doc_body(external_id="osprey", title="Osprey retention", text=TEXT)).json()

    chunks = Chunk.objects.filter(document_id=body["document_id"])
    assert chunks.count() > 2
    assert not chunks.filter(embedding__isnull=False).exists()  # stored without waiting for the model
    # Lexical leg: the chunks are retrievable before any embedding exists.
    lexical = [i for i in search(agent, "Osprey snapshots pruning") if i.packet["document_id"] == body["document_id"]]
    assert lexical and all(i.lexical_rank for i in lexical)
    # The task was queued on commit; a real `manage.py qcluster` started now picks it up.
    request.getfixturevalue("qcluster")
    wait_for(lambda: not chunks.filter(embedding__isnull=True).exists(), timeout=90)
    semantic = [i for i in search(agent, "how long are the nightly backups kept")
                if i.packet["document_id"] == body["document_id"]]
    assert semantic and all(i.semantic_rank for i in semantic)


@pytest.mark.django_db
def test_the_embedding_task_is_idempotent(settings, agent, handbook):
    from django_q.conf import Conf

    from memory.knowledge.tasks import embed_document

    settings.ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS = 2
    previous, Conf.SYNC = Conf.SYNC, True  # the on-commit task runs in-process...
    try:
        document_id = agent.post(URL, doc_body(external_id="osprey", text=TEXT)).json()["document_id"]
    finally:
        Conf.SYNC = previous
    # ...but django_db wraps the test in a transaction, so on_commit never fired: run it by hand, twice.
    assert embed_document(document_id) == Chunk.objects.filter(document_id=document_id).count()
    assert embed_document(document_id) == 0
    assert not Chunk.objects.filter(document_id=document_id, embedding__isnull=True).exists()
