"""The admin: access domains are managed there; documents and chunks are read-only."""

from __future__ import annotations

import pytest

from memory.knowledge.models import AccessDomain
from tests.knowledge.conftest import doc_body

pytestmark = pytest.mark.django_db


def test_an_operator_adds_an_access_domain_with_readers(admin_client, tenant, agent):
    response = admin_client.post("/admin/knowledge/accessdomain/add/", {
        "tenant": tenant.pk, "name": "legal", "description": "", "readers": [agent.subject.pk],
        "reader_kinds": "project,org",
    })

    assert response.status_code == 302, response.content.decode()[:2000]
    domain = AccessDomain.objects.get(name="legal")
    assert list(domain.readers.all()) == [agent.subject]
    assert domain.reader_kinds == ["project", "org"]


def test_documents_and_chunks_are_listed_but_not_editable(admin_client, agent, handbook):
    document_id = agent.post("/api/v1/documents", doc_body()).json()["document_id"]

    listing = admin_client.get("/admin/knowledge/document/")
    chunks = admin_client.get("/admin/knowledge/chunk/")

    assert listing.status_code == 200 and "refunds.md" in listing.content.decode()
    assert chunks.status_code == 200
    assert admin_client.get("/admin/knowledge/document/add/").status_code == 403
    assert admin_client.post(f"/admin/knowledge/document/{document_id}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.get(f"/admin/knowledge/accessdomain/{handbook.pk}/delete/").status_code == 403


def test_it_refuses_readers_from_another_tenant(admin_client, tenant, foreign_agent):
    response = admin_client.post("/admin/knowledge/accessdomain/add/", {
        "tenant": tenant.pk, "name": "legal", "description": "", "readers": [foreign_agent.subject.pk],
        "reader_kinds": "",
    })

    assert response.status_code == 200
    assert "Readers must be subjects of the domain&#x27;s tenant" in response.content.decode()
    assert not AccessDomain.objects.filter(name="legal").exists()
