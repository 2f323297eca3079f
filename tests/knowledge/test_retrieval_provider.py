"""The "knowledge" retrieval provider: chunks only from domains the principal may read."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.knowledge.services import DocumentInput, document_ingest, operator_scope
from memory.retrieval.sources import provider_names
from memory.scope import Scope
from tests.knowledge.conftest import scope_for, search

pytestmark = pytest.mark.django_db

TEXT = "The VPN rotation schedule: gateway certificates are rotated every ninety days by the platform team."
QUERY = "VPN gateway certificate rotation"


def ingest(tenant, domain, external_id="vpn.md", text=TEXT, title="VPN runbook"):
    return document_ingest(scope=operator_scope(tenant), domain=domain,
                           item=DocumentInput(access_domain=domain.name, external_id=external_id, title=title,
                                              text=text)).document


@pytest.fixture
def corpus(tenant, other_tenant, make_domain, agent, outsider, foreign_agent):
    """The same text in four domains: acme/ops (owner), acme/finance (outsider), globex/ops (foreign)."""
    ops = make_domain(tenant, "ops")
    finance = make_domain(tenant, "finance", subjects=("usr_outsider",))
    foreign_ops = make_domain(other_tenant, "ops")
    return {"ops": ingest(tenant, ops), "finance": ingest(tenant, finance),
            "foreign": ingest(other_tenant, foreign_ops)}


def test_it_is_registered_under_the_include_name_knowledge():
    assert "knowledge" in provider_names()


def test_it_returns_chunks_with_the_knowledge_packet_from_both_legs(agent, corpus):
    items = search(agent, QUERY)

    assert [i.packet["document_id"] for i in items] == [corpus["ops"].pk]
    item = items[0]
    assert item.source == "knowledge"
    assert item.text == TEXT
    assert item.lexical_rank == 1 and item.semantic_rank == 1
    assert 0.3 < item.semantic_similarity <= 1.0
    assert item.authority == "org_record"
    assert item.source_date == corpus["ops"].ingested_at
    assert item.packet["kind"] == "knowledge"
    assert item.packet["external_id"] == "vpn.md"
    assert item.packet["title"] == "VPN runbook"
    assert item.packet["chunk"] == 0
    assert item.packet["content_role"] == "data"


def test_a_principal_outside_a_domain_never_receives_its_chunks_for_the_identical_query(
        agent, outsider, foreign_agent, make_agent, tenant, corpus):
    stranger = make_agent(tenant, "usr_stranger")

    owner_docs = {i.packet["document_id"] for i in search(agent, TEXT)}
    outsider_docs = {i.packet["document_id"] for i in search(outsider, TEXT)}
    foreign_docs = {i.packet["document_id"] for i in search(foreign_agent, TEXT)}

    assert owner_docs == {corpus["ops"].pk}
    assert outsider_docs == {corpus["finance"].pk}
    assert foreign_docs == {corpus["foreign"].pk}
    assert search(stranger, TEXT) == []


def test_the_domain_predicate_is_in_the_sql_of_both_legs(agent, corpus):
    with CaptureQueriesContext(connection) as queries:
        search(agent, QUERY)

    assert len(queries) == 1  # both legs, one statement, one snapshot
    sql = queries[0]["sql"]
    lexical, semantic = sql.split("semantic AS (")
    for leg in (lexical.split("lexical AS (")[1], semantic):
        assert "c.access_domain_id IN (" in leg and "knowledge_accessdomain_readers" in leg


def test_it_serves_a_semantic_match_that_shares_no_word_with_the_query(agent, corpus):
    items = search(agent, "how often do we renew the tunnel's TLS credentials")

    assert [i.packet["document_id"] for i in items] == [corpus["ops"].pk]
    assert items[0].lexical_rank is None and items[0].semantic_rank == 1


def test_a_namespace_restricted_key_reads_only_the_granted_domains(agent, tenant, make_domain, corpus):
    runbooks = make_domain(tenant, "runbooks")
    runbook = ingest(tenant, runbooks, external_id="vpn2.md")
    base = scope_for(agent)
    only_runbooks = Scope(**{**base.__dict__, "namespaces": ("user", "knowledge/runbooks")})
    no_knowledge = Scope(**{**base.__dict__, "namespaces": ("user",)})
    all_knowledge = Scope(**{**base.__dict__, "namespaces": ("knowledge",)})

    assert {i.packet["document_id"] for i in search(only_runbooks, TEXT)} == {runbook.pk}
    assert search(no_knowledge, TEXT) == []
    assert {i.packet["document_id"] for i in search(all_knowledge, TEXT)} == {runbook.pk, corpus["ops"].pk}


def test_the_access_domains_filter_narrows_but_never_widens(agent, tenant, make_domain, corpus):
    runbooks = make_domain(tenant, "runbooks")
    ingest(tenant, runbooks, external_id="vpn2.md")

    narrowed = search(agent, TEXT, filters={"access_domains": ["ops", "finance"]})

    assert {i.packet["access_domain"] for i in narrowed} == {"ops"}


def test_it_limits_each_leg(agent, tenant, make_domain):
    bulk = make_domain(tenant, "bulk")
    for n in range(8):
        ingest(tenant, bulk, external_id=f"vpn-{n}.md", text=f"{TEXT} Copy number {n}.")

    items = search(agent, QUERY, limit=3)

    assert sum(1 for i in items if i.lexical_rank) == 3
    assert sum(1 for i in items if i.semantic_rank) == 3
    assert len(items) <= 6
