"""The procedures area's steps for the in-process evaluation (memory/evaluation/operators.py)."""

from __future__ import annotations

from typing import Any

from memory.evaluation.operators import ProcedureSteps, register_procedures
from memory.identity.access import reviewer_of
from procedures.models import ChangeProposal
from procedures.services import procedure_publish


def _publish(*, tenant: Any, name: str, body: str, reviewer: Any, change_summary: str) -> Any:
    return procedure_publish(tenant=tenant, name=name, body=body, reviewer=reviewer_of(reviewer),
                             change_summary=change_summary)


def _review_state(proposal_id: str) -> tuple[str, list[str]]:
    stored = ChangeProposal.objects.get(pk=proposal_id)
    return stored.status, sorted({f["code"] for f in stored.flags})


register_procedures(ProcedureSteps(publish=_publish, review_state=_review_state))
