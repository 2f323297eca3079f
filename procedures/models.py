"""Procedural memory: how an agent should do a task, behind the strongest gate in Engram.

- ``Procedure``: a name in a tenant, scoped to the whole org or to a project (visible to the
  subjects listed in ``members``). ``current_number`` points at its current approved version.
- ``ProcedureVersion``: immutable. Only publishing creates one (a reviewer approving a proposal,
  or ``manage.py publish_procedure``); nothing updates one: the services have no update path, the
  admin is read-only and a database trigger (migration 0002) refuses every UPDATE of the table.
- ``ChangeProposal``: what an agent or a person would like version n+1 to be, against a base
  version; pending until a reviewer approves or rejects it, stale once its base is no longer current.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models

from memory.ids import new_id
from memory.models import Subject, Tenant
from memory.search import TEXT_SEARCH_CONFIG


def new_proposal_id() -> str:
    return new_id("prp")


class Procedure(models.Model):
    class Scope(models.TextChoices):
        ORG = "org"  # every subject of the tenant may read it
        PROJECT = "project"  # only the subjects listed in `members`

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="procedures")
    name = models.CharField(max_length=64)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.ORG)
    members: models.ManyToManyField[Subject, ProcedureMember] = models.ManyToManyField(
        Subject, related_name="procedures", blank=True, through="ProcedureMember",
        help_text="Subjects that may read a project procedure.")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+", help_text="The person responsible for the procedure.")
    # 0 until the first version is published. Moved only under select_for_update on this row.
    current_number = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="procedure_unique_name")]

    def __str__(self) -> str:
        return f"{self.tenant_id}:{self.name}"


class ProcedureMember(models.Model):
    """A subject that may read a project procedure (``Procedure.members``), stored with the procedure's tenant."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    procedure = models.ForeignKey(Procedure, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="+", db_constraint=False)

    class Meta:
        db_table = "procedures_procedure_members"
        constraints = [models.UniqueConstraint(fields=["procedure", "subject", "tenant"],
                                               name="procedure_member_unique")]


class ProcedureVersion(models.Model):
    # The procedure's tenant, copied: the distribution column on a tenant-sharded database (memory/sharding.py).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    procedure = models.ForeignKey(Procedure, on_delete=models.CASCADE, related_name="versions",
                                  db_constraint=False)
    number = models.PositiveIntegerField()
    body = models.TextField()
    change_summary = models.CharField(max_length=500, blank=True)
    author = models.CharField(max_length=64, help_text='Who wrote the body: "agent_key:<id>" or "user:<id>".')
    # PROTECT: a version's approver is part of its history; deactivate the login instead of deleting it.
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    approved_at = models.DateTimeField()
    # At most one version per proposal (procedureversion_unique_proposal, with the tenant in it).
    proposal = models.ForeignKey("ChangeProposal", on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="+", help_text="The proposal it was published from, if any.",
                                 db_constraint=False)
    # Derived from the body by the database itself, so it can never drift (and needs no UPDATE).
    search_vector = models.GeneratedField(
        expression=SearchVector("body", config=TEXT_SEARCH_CONFIG),
        output_field=SearchVectorField(), db_persist=True,
    )

    class Meta:
        ordering = ["procedure", "number"]
        constraints = [
            # The backstop of the approval race: two publishers can never both create number n+1.
            models.UniqueConstraint(fields=["procedure", "number", "tenant"],
                                    name="procedureversion_unique_number"),
            models.UniqueConstraint(fields=["proposal", "tenant"], name="procedureversion_unique_proposal"),
        ]
        indexes = [GinIndex(fields=["search_vector"], name="procedureversion_fts_idx")]

    def __str__(self) -> str:
        return f"{self.procedure_id} v{self.number}"


class ChangeProposal(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        STALE = "stale"  # its base version is no longer current; rebase (a new proposal) or reject

    id = models.CharField(primary_key=True, max_length=40, default=new_proposal_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    procedure = models.ForeignKey(Procedure, on_delete=models.CASCADE, related_name="proposals",
                                  db_constraint=False)
    base_version = models.ForeignKey(ProcedureVersion, on_delete=models.PROTECT, related_name="proposals",
                                     db_constraint=False)
    body = models.TextField()
    rationale = models.TextField(blank=True)
    source_event_ids = models.JSONField(default=list, blank=True)
    # The proposer: an agent key acting for a subject, or a person (rollbacks, rebases).
    proposer = models.CharField(max_length=64)
    proposer_subject = models.ForeignKey(Subject, on_delete=models.SET_NULL, null=True, blank=True,
                                         related_name="+", db_constraint=False)
    proposer_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                      blank=True, related_name="+")
    # [{"code", "title", "explanation", "evidence"}] from procedures/flags.py; informs, never decides.
    flags = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.CharField(max_length=500, blank=True)
    rebased_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="rebased_into", db_constraint=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "status", "created_at"], name="proposal_queue_idx")]

    def __str__(self) -> str:
        return self.id

    @property
    def result_version(self) -> ProcedureVersion | None:
        return ProcedureVersion.objects.filter(proposal=self).first()
