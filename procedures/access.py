"""Reviewers' access to procedure proposals and procedures: the people's gate (memory/identity/access.py)
applied to this area's objects, which that module, below this area, cannot name."""

from __future__ import annotations

from memory.identity.access import Reviewer, reviewed_get
from procedures.models import ChangeProposal, Procedure


def access_proposal(reviewer: Reviewer, proposal_id: str) -> ChangeProposal:
    """A proposal of a tenant the reviewer reviews, or the same 404 as for a missing id."""
    return reviewed_get(reviewer, ChangeProposal.objects.select_related(
        "procedure", "base_version", "tenant", "proposer_subject", "proposer_user", "decided_by"), proposal_id)


def access_procedure(reviewer: Reviewer, procedure_id: int) -> Procedure:
    return reviewed_get(reviewer, Procedure.objects.select_related("tenant"), procedure_id)
