"""The retrieval statement's scope predicates are composed with psycopg.sql (memory/db/statements.py), beside the
ORM's ``for_scope``: for every shape of scope and filters, its row sources hold exactly the records the ORM's
querysets select, so what an agent may read is decided the same way on both paths."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from memory.db.statements import Filters, render, scoped_sources
from memory.identity.services import subject_get_or_create
from memory.models import Confidence, MemoryRecord, RecordStatus
from memory.namespaces import under_any_q
from memory.records.services import RecordInput, memory_write_batch
from memory.retrieval import candidates as legs
from memory.retrieval.models import TermBucket
from memory.scope import Scope

pytestmark = pytest.mark.django_db

NAMESPACES = ["user/travel", "user_x/notes", "user", "org/a_b", "org/aXb", "project"]


def _scope(tenant, external_id, namespaces=None):
    subject = subject_get_or_create(tenant=tenant, external_id=external_id)
    return Scope.for_agent(tenant_id=tenant.pk, subject_id=subject.pk, subject_external_id=external_id,
                           agent_key_id=1, permissions={"read", "write"}, namespaces=namespaces)


@pytest.fixture
def stored(tenant, other_tenant, sync_tasks, django_capture_on_commit_callbacks):
    """Records of two subjects and two tenants in namespaces that differ by a separator, an underscore (a LIKE
    wildcard) and a prefix; some superseded, some expired, two kinds and two types."""
    past = timezone.now() - dt.timedelta(days=1)
    for t, external_id in ((tenant, "usr_owner"), (tenant, "usr_other"), (other_tenant, "usr_owner")):
        scope = _scope(t, external_id)
        items = [RecordInput(namespace=ns, kind="preference" if n % 2 else "note", field=f"f{n}", value=f"v{n}",
                             text=f"{ns} says {n}", event_id=f"e{n}", memory_type="episodic" if n % 3 else "semantic",
                             valid_until=past if n == 4 else None)
                 for n, ns in enumerate(NAMESPACES)]
        with django_capture_on_commit_callbacks(execute=True):
            memory_write_batch(scope=scope, items=items)
            memory_write_batch(scope=scope, items=[RecordInput(namespace="user", kind="note", field="f2",
                                                               value="new", text="user says again", event_id="e9")])
    # The term statistics of every (subject, namespace, class) the records were written to, as the worker keeps
    # them for a large subject.
    for key in MemoryRecord.objects.values("tenant_id", "subject_id", "namespace", "memory_class_id").distinct():
        TermBucket.objects.create(**key, records=1, length=1.0)
    return _scope(tenant, "usr_owner")


def _ids(source, params):
    with connection.cursor() as cursor:
        cursor.execute(render("SELECT id FROM ({s}) t", s=source.select), params)
        return {row[0] for row in cursor.fetchall()}


SHAPES = [
    (None, Filters(namespaces=None)),
    (("user",), Filters(namespaces=None)),
    (("org/a_b", "project"), Filters(namespaces=None)),
    (None, Filters(namespaces=["user"], kinds=["note"])),
    (None, Filters(namespaces=["org/a_b"], types=["semantic"], fields=["f3", "f4"])),
    (("user", "org"), Filters(namespaces=["user/travel"], source_types=["explicit_user_statement"])),
]


@pytest.mark.parametrize(("grant", "filters"), SHAPES)
def test_each_source_holds_exactly_the_records_the_orm_selects(stored, tenant, grant, filters):
    scope = _scope(tenant, "usr_owner", namespaces=grant)
    scoped = scoped_sources(scope, filters)
    eligible = {r.pk for r in legs.eligible(scope, filters)}
    not_servable = ~Q(status=RecordStatus.ACTIVE) | Q(valid_until__lte=Now()) | Q(
        confidence=Confidence.CANDIDATE, memory_class__candidates_retrievable=False)
    everything = MemoryRecord.objects.for_scope(scope)
    if filters.namespaces is not None:
        everything = everything.under(filters.namespaces)
    for name, values in (("kind", filters.kinds), ("memory_type", filters.types), ("field", filters.fields),
                         ("source_type", filters.source_types)):
        if values:
            everything = everything.filter(**{f"{name}__in": values})

    buckets = TermBucket.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id,
                                        memory_class__allowed_readers__contains=[scope.reader_role])
    for prefixes in (grant, filters.namespaces):
        if prefixes is not None:
            buckets = buckets.filter(under_any_q(prefixes))

    assert eligible and buckets  # every shape leaves something to compare
    assert _ids(scoped.eligible, scoped.params) == eligible
    assert _ids(scoped.excluded, scoped.params) == {r.pk for r in everything.filter(not_servable)}
    assert _ids(scoped.buckets, scoped.params) == {b.pk for b in buckets}


def test_a_grant_reads_no_sibling_namespace_whose_name_only_starts_alike(stored, tenant):
    scope = _scope(tenant, "usr_owner", namespaces=("user", "org/a_b"))
    scoped = scoped_sources(scope, Filters(namespaces=None))

    namespaces = set(MemoryRecord.objects.filter(pk__in=_ids(scoped.eligible, scoped.params))
                     .values_list("namespace", flat=True))
    assert namespaces == {"user", "user/travel", "org/a_b"}
