"""What an in-process evaluation does as an operator or reviewer of an area above this package.

The evaluation lives in ``memory`` but probes every area; an area that ``memory`` must not import
(procedures) registers the few operator steps the scenarios need here when its app is ready, the way
areas register deletion surfaces and retrieval providers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProcedureSteps:
    # publish(tenant, name, body, reviewer user, change summary): the base version, as an operator would.
    publish: Callable[..., Any]
    # review_state(proposal id) -> (status, flag codes): what a reviewer would see on the proposal.
    review_state: Callable[[str], tuple[str, list[str]]]


_procedures: list[ProcedureSteps] = []


def register_procedures(steps: ProcedureSteps) -> None:
    _procedures[:] = [steps]


def procedures() -> ProcedureSteps:
    if not _procedures:
        raise LookupError("The procedures app is not installed: its evaluation steps are not registered.")
    return _procedures[0]
