"""POST/GET /api/v1/documents and GET /api/v1/documents/{id}: ingest, versions, scope, secrets."""

from __future__ import annotations

import pytest

from memory.knowledge.models import Chunk, Document
from memory.models import AuditEntry
from tests.knowledge.conftest import doc_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/documents"


def test_it_stores_a_document_as_version_one_with_its_chunks(agent, handbook):
    response = agent.post(URL, doc_body())

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["result"] == "created"
    assert body["access_domain"] == "handbook"
    assert body["external_id"] == "refunds.md"
    assert body["title"] == "Refund policy"
    assert body["uri"] == "https://docs.example.com/refunds"
    assert body["mime_type"] == "text/plain"
    assert body["metadata"] == {"team": "support"}
    assert body["version"] == 1
    assert len(body["content_hash"]) == 64
    assert body["ingested_at"]
    chunks = list(Chunk.objects.filter(document_id=body["document_id"]))
    assert len(chunks) == 1  # a short document is one chunk
    assert chunks[0].embedding is not None and len(chunks[0].embedding) == 384
    assert Chunk.objects.filter(pk=chunks[0].pk, search_vector="refund").exists()
    assert AuditEntry.objects.filter(action="document.ingest", object_id=str(body["document_id"])).exists()


def test_it_is_a_no_op_to_post_the_same_content_again(agent, handbook):
    first = agent.post(URL, doc_body()).json()
    chunk_ids = set(Chunk.objects.values_list("pk", flat=True))

    again = agent.post(URL, doc_body())

    assert again.status_code == 200
    assert again.json()["result"] == "unchanged"
    assert again.json()["version"] == 1
    assert again.json()["document_id"] == first["document_id"]
    assert set(Chunk.objects.values_list("pk", flat=True)) == chunk_ids
    assert AuditEntry.objects.filter(action__startswith="document.").count() == 1


def test_it_stores_new_content_as_the_next_version_replacing_every_old_chunk(agent, handbook):
    first = agent.post(URL, doc_body(text="Old wording about refunds.\n\n" * 3)).json()
    old_chunks = set(Chunk.objects.values_list("pk", flat=True))

    response = agent.post(URL, doc_body(text="New wording: refunds within 60 days."))

    assert response.status_code == 200
    body = response.json()
    assert body["result"] == "updated"
    assert body["document_id"] == first["document_id"]
    assert body["version"] == 2
    assert Document.objects.count() == 1
    texts = list(Chunk.objects.values_list("text", flat=True))
    assert texts == ["New wording: refunds within 60 days."]
    assert not set(Chunk.objects.values_list("pk", flat=True)) & old_chunks
    assert AuditEntry.objects.filter(action="document.version", data__version=2).exists()


def test_it_converts_html_posted_as_text_html(agent, handbook):
    html = "<html><head><title>Shipping</title></head><body><h1>Shipping</h1><p>We ship <b>daily</b>.</p></body></html>"

    body = agent.post(URL, doc_body(external_id="shipping", title="", text=html, mime_type="text/html")).json()

    assert body["title"] == "Shipping"
    assert list(Chunk.objects.values_list("text", flat=True)) == ["Shipping\n\nWe ship daily."]


def test_it_refuses_a_document_with_a_secret_naming_where_but_not_what(agent, handbook):
    text = "Intro paragraph.\n\nSecond paragraph, line one.\nThe admin password is Hunter2Hunter2!\n\nEnd."

    response = agent.post(URL, doc_body(text=text))

    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "secret_detected"
    assert "Hunter2" not in str(body)
    finding = next(f for f in body["findings"] if f["field"] == "text")
    assert finding["kind"] == "password"
    assert finding["line"] == 4
    assert text[finding["char_start"]:finding["char_end"]] == "The admin password is Hunter2Hunter2!"
    assert "line 4" in body["detail"]
    assert Document.objects.count() == 0 and Chunk.objects.count() == 0


def test_it_refuses_a_secret_in_the_metadata_too(agent, handbook):
    response = agent.post(URL, doc_body(metadata={"note": "api_key = sk_live_abcdefghijklmnop1234"}))

    assert response.status_code == 422
    assert response.json()["findings"][0]["field"] == "metadata.note"
    assert Document.objects.count() == 0


@pytest.mark.parametrize("change", [
    {"text": ""}, {"external_id": ""}, {"access_domain": "Not A Name"}, {"mime_type": "application/pdf"},
    {"surprise": 1}, {"title": "", "text": "plain text without any title"},
])
def test_it_refuses_invalid_input_with_400(agent, handbook, change):
    response = agent.post(URL, doc_body(**change))

    assert response.status_code == 400, response.json()
    assert response.json()["code"] in {"invalid", "empty_document"}
    assert Document.objects.count() == 0


def test_it_needs_credentials(client, handbook):
    response = client.post(URL, doc_body(), content_type="application/json")

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_it_needs_the_write_scope(make_agent, tenant, handbook):
    reader = make_agent(tenant, "usr_owner", scopes=["read"])

    response = reader.post(URL, doc_body())

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_it_answers_404_for_a_domain_the_subject_may_not_read(outsider, handbook):
    response = outsider.post(URL, doc_body())

    assert response.status_code == 404
    assert Document.objects.count() == 0


def test_it_answers_404_for_another_tenants_domain(foreign_agent, handbook):
    # Same subject external id, same domain name, other tenant.
    response = foreign_agent.post(URL, doc_body())

    assert response.status_code == 404


def test_it_honours_namespace_grants_as_knowledge_domains(make_agent, make_domain, tenant, handbook):
    make_domain(tenant, "runbooks")
    scoped = make_agent(tenant, "usr_owner", namespaces=["user", "knowledge/runbooks"])

    assert scoped.post(URL, doc_body()).status_code == 404
    assert scoped.post(URL, doc_body(access_domain="runbooks")).status_code == 201


def test_it_lists_only_readable_documents_filtered_by_domain(agent, outsider, foreign_agent, make_domain, tenant,
                                                              other_tenant, handbook):
    make_domain(tenant, "runbooks")
    make_domain(tenant, "secret-plans", subjects=("usr_outsider",))
    make_domain(other_tenant, "handbook")
    agent.post(URL, doc_body())
    agent.post(URL, doc_body(access_domain="runbooks", external_id="deploy.md", title="Deploy"))
    outsider.post(URL, doc_body(access_domain="secret-plans", external_id="plan", title="Plan"))
    foreign_agent.post(URL, doc_body(title="Foreign refunds"))

    everything = agent.get(URL).json()["results"]
    only_runbooks = agent.get(URL, {"access_domain": "runbooks"}).json()["results"]

    assert sorted(d["external_id"] for d in everything) == ["deploy.md", "refunds.md"]
    assert [d["title"] for d in only_runbooks] == ["Deploy"]
    assert agent.get(URL, {"access_domain": "secret-plans"}).json()["results"] == []
    assert [d["title"] for d in foreign_agent.get(URL).json()["results"]] == ["Foreign refunds"]
    assert agent.get(URL, {"access_domain": "Bad Name"}).status_code == 400


def test_it_shows_one_document_with_its_chunks(agent, handbook):
    document_id = agent.post(URL, doc_body()).json()["document_id"]

    response = agent.get(f"{URL}/{document_id}")

    assert response.status_code == 200
    body = response.json()
    assert body["chunk_count"] == 1
    assert body["chunks"][0]["ordinal"] == 0
    assert body["chunks"][0]["text"].startswith("Customers may request a refund")


def test_it_hides_a_document_from_other_subjects_and_tenants(agent, outsider, foreign_agent, client, handbook):
    document_id = agent.post(URL, doc_body()).json()["document_id"]

    assert outsider.get(f"{URL}/{document_id}").status_code == 404
    assert foreign_agent.get(f"{URL}/{document_id}").status_code == 404
    assert outsider.delete(f"{URL}/{document_id}").status_code == 404
    assert foreign_agent.delete(f"{URL}/{document_id}").status_code == 404
    assert client.get(f"{URL}/{document_id}").status_code == 401
    assert agent.get(f"{URL}/999999").status_code == 404
    assert Document.objects.filter(pk=document_id).exists()


def test_it_lets_every_subject_of_a_kind_or_the_whole_tenant_read(make_agent, make_domain, tenant, agent):
    make_domain(tenant, "public", subjects=(), all_subjects=True)
    make_domain(tenant, "projects", subjects=(), kinds=("project",))
    document = agent.post  # the owner is a user subject: not a reader of "projects"
    assert document(URL, doc_body(access_domain="public")).status_code == 201
    assert document(URL, doc_body(access_domain="projects")).status_code == 404

    from memory.identity.services import subject_get_or_create

    subject_get_or_create(tenant=tenant, external_id="prj_apollo", kind="project")
    project = make_agent(tenant, "prj_apollo")
    assert project.post(URL, doc_body(access_domain="projects")).status_code == 201
    assert {d["access_domain"] for d in project.get(URL).json()["results"]} == {"public", "projects"}


def test_an_out_of_range_document_id_is_a_plain_404(agent, handbook):
    assert agent.get(f"{URL}/99999999999999999999999").status_code == 404
    assert agent.delete(f"{URL}/99999999999999999999999").status_code == 404
