"""POST /api/v1/documents/batch: up to 200 documents, per-item results, exactly the valid ones stored."""

from __future__ import annotations

import pytest

from memory.knowledge.models import Chunk, Document
from tests.knowledge.conftest import doc_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/documents/batch"


def test_a_batch_of_200_with_invalid_items_stores_exactly_the_valid_ones(agent, handbook, make_domain, tenant):
    make_domain(tenant, "not-mine", subjects=("usr_someone_else",))
    documents, expected_invalid = [], {}
    for i in range(200):
        item = doc_body(external_id=f"doc-{i}", title=f"Document {i}", text=f"Article {i} about topic {i % 7}.")
        if i % 10 == 3:
            item["text"] = ""  # invalid field
            expected_invalid[i] = "invalid"
        elif i % 10 == 5:
            item["text"] = f"Article {i}. The root password is Tr0ub4dor&3xyz"
            expected_invalid[i] = "secret_detected"
        elif i % 10 == 7:
            item["access_domain"] = "not-mine"
            expected_invalid[i] = "not_found"
        elif i == 198:
            item["external_id"] = "doc-0"  # the same document twice in one batch
            expected_invalid[i] = "duplicate_in_batch"
        documents.append(item)

    response = agent.post(URL, {"documents": documents})

    assert response.status_code == 200, response.json()
    body = response.json()
    results = body["results"]
    assert [r["index"] for r in results] == list(range(200))
    for r in results:
        if r["index"] in expected_invalid:
            assert r["status"] == "error" and r["code"] == expected_invalid[r["index"]], r
            assert "document_id" not in r
        else:
            assert r["status"] == "created" and r["version"] == 1, r
    assert "Tr0ub4dor" not in response.content.decode()
    valid = 200 - len(expected_invalid)
    assert body["stored"] == valid and body["failed"] == len(expected_invalid)
    stored_ids = {r["document_id"] for r in results if r["status"] == "created"}
    assert set(Document.objects.values_list("pk", flat=True)) == stored_ids
    assert Chunk.objects.count() == valid
    assert not Chunk.objects.filter(embedding__isnull=True).exists()


def test_reposting_a_batch_reports_unchanged_and_updated_items(agent, handbook):
    agent.post(URL, {"documents": [doc_body(external_id="a"), doc_body(external_id="b")]})

    body = agent.post(URL, {"documents": [doc_body(external_id="a"),
                                          doc_body(external_id="b", text="Changed text.")]}).json()

    assert [(r["status"], r["version"]) for r in body["results"]] == [("unchanged", 1), ("updated", 2)]


@pytest.mark.parametrize("payload", [{"documents": []}, {"documents": "nope"}, {"items": []},
                                     {"documents": [doc_body(external_id=f"d{i}") for i in range(201)]}])
def test_it_refuses_a_malformed_or_oversized_batch_as_a_whole(agent, handbook, payload):
    response = agent.post(URL, payload)

    assert response.status_code == 400
    assert Document.objects.count() == 0


def test_it_needs_credentials_and_the_write_scope(client, make_agent, tenant, handbook):
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    assert client.post(URL, {"documents": [doc_body()]}, content_type="application/json").status_code == 401
    assert reader.post(URL, {"documents": [doc_body()]}).status_code == 403
    assert Document.objects.count() == 0


def test_another_tenants_domain_is_a_per_item_404(foreign_agent, handbook):
    body = foreign_agent.post(URL, {"documents": [doc_body()]}).json()

    assert body["results"][0]["code"] == "not_found"
    assert Document.objects.count() == 0
