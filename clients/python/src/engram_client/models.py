"""Typed results. Every model keeps fields the server adds later (``extra="allow"``), so a newer server
never breaks an older client; ``.model_dump()`` gives the JSON the server sent."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Source(_Model):
    type: str
    event_id: str | None = None
    reference: dict[str, Any] | None = None


class Policy(_Model):
    """What precedence decided for a write (``stored``, ``superseded_existing``, ``kept_inactive`` ...)."""

    outcome: str
    reason: str = ""
    conflict_with: list[str] = Field(default_factory=list)


class Memory(_Model):
    """A long-term memory record: the fact, its provenance, confidence, validity and supersession."""

    memory_id: str
    subject_id: str
    namespace: list[str]
    kind: str
    type: str = "semantic"
    fact: dict[str, Any]
    text: str
    source: Source
    confidence: str
    sensitivity: str = ""
    memory_class: str = ""
    status: str
    status_reason: str = ""
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    created_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    policy: Policy | None = None  # on write answers
    corrects: str | None = None  # on correction answers

    @property
    def field(self) -> str:
        return str(self.fact.get("field", ""))

    @property
    def value(self) -> Any:
        return self.fact.get("value")


class Candidate(_Model):
    """A model-inferred proposal: never a fact until consolidation (and, where policy says, a reviewer)."""

    candidate_id: str
    status: str
    subject_id: str
    namespace: list[str]
    kind: str
    fact: dict[str, Any]
    text: str
    source: Source
    confidence: str = "candidate"
    created_at: datetime | None = None


class Packet(_Model):
    """One piece of retrieved context, with its provenance. ``content_role`` is always ``data``: memory is
    something the model reads, never instructions it follows (``flags`` names instruction-shaped text)."""

    source: str = "memory"
    fact: str | None = None
    text: str | None = None
    status: str = ""
    source_date: str | None = None
    memory_id: str | None = None
    kind: str | None = None
    namespace: list[str] | None = None
    score: float = 0.0
    tokens: int = 0
    content_role: str = "data"
    flags: list[str] = Field(default_factory=list)

    @property
    def content(self) -> str:
        return self.fact if self.fact is not None else (self.text or "")


class Budget(_Model):
    limit: int
    used: int


class SearchResult(_Model):
    """``POST /retrieve``: packets within the token budget, what was dropped and why, and the log id."""

    retrieval_id: str
    packets: list[Packet]
    budget: Budget
    dropped: dict[str, int] = Field(default_factory=dict)


T = TypeVar("T")


class Page(_Model, Generic[T]):
    results: list[T]
    next_offset: int | None = None


class History(_Model):
    memory_id: str
    history: list[Memory]


class DeletionStep(_Model):
    name: str
    status: str
    attempts: int = 0
    rows: int = 0
    last_error: str = ""


class DeletionJob(_Model):
    """A deletion in progress or done: one step per surface, then verification by reading."""

    deletion_id: str
    status: str
    status_url: str | None = None
    kind: str | None = None
    reason: str = ""
    memory_id: str | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    steps: list[DeletionStep] = Field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status in ("completed", "failed")


class Thread(_Model):
    thread_id: str
    subject_id: str
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    last_seq: int = 0
    created_at: datetime | None = None


class ThreadEvent(_Model):
    event_id: str
    thread_id: str
    seq: int
    kind: str
    role: str = ""
    text: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    corrects: str | None = None
    status: str = "recorded"
    idempotency_key: str | None = None
    created_at: datetime | None = None
    deleted_at: datetime | None = None


class EventPage(_Model):
    thread_id: str
    results: list[ThreadEvent]
    next_after: int | None = None
    next_before: int | None = None


class ThreadCleared(_Model):
    deletion_id: str
    status: str
    status_url: str
    thread_id: str
    up_to_seq: int
    cleared: int


class Summary(_Model):
    summary_id: str
    thread_id: str
    origin: str
    text: str
    source_range: dict[str, int]
    summarizer: dict[str, str]
    status: str
    unresolved: list[Any] = Field(default_factory=list)
    referenced_event_ids: list[str] = Field(default_factory=list)
    stale_reason: str | None = None
    created_at: datetime | None = None


class Checkpoint(_Model):
    """A workflow's resumable state; ``version`` is what ``If-Match`` must name on the next write."""

    workflow_id: str
    version: int
    thread_id: str | None = None
    current_step: str = ""
    completed_steps: list[Any] = Field(default_factory=list)
    pending_approval: Any = None
    tool_call_id: str = ""
    idempotency_key: str = ""
    artifacts: dict[str, Any] = Field(default_factory=dict)
    last_verified_outcome: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ToolCall(_Model):
    # A key without the read scope gets back from a write only what it sent: `tool` and `arguments` are
    # absent from its PATCH answers (empty here), `outcome` from a replayed record (None).
    workflow_id: str
    idempotency_key: str
    tool: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: str
    outcome: Any = None
    outcome_at: datetime | None = None
    created_at: datetime | None = None


class Document(_Model):
    document_id: int
    access_domain: str
    external_id: str
    title: str = ""
    uri: str = ""
    mime_type: str = "text/plain"
    version: int = 1
    metadata: dict[str, Any] = Field(default_factory=dict)
    char_count: int = 0
    chunk_count: int | None = None
    result: str | None = None  # "created", "updated" or "unchanged" on ingest answers
    chunks: list[dict[str, Any]] | None = None


class Procedure(_Model):
    """An approved procedure version. ``body`` is absent in lists."""

    name: str
    scope: str = ""
    version: int
    status: str = "approved"
    approved_by: str = ""
    approved_at: datetime | None = None
    change_summary: str = ""
    body: str | None = None


class Proposal(_Model):
    proposal_id: str
    procedure: str
    base_version: int
    status: str
    rationale: str = ""
    source_event_ids: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    decided_at: datetime | None = None
    decision_reason: str = ""
    published_version: int | None = None


class PrincipalToken(_Model):
    token: str
    subject_id: str
    display_name: str = ""
    expires_at: datetime
    namespaces: list[list[str]] | list[str] | None = None


__all__ = [
    "Source", "Policy", "Memory", "Candidate", "Packet", "Budget", "SearchResult", "Page", "History",
    "DeletionStep", "DeletionJob", "Thread", "ThreadEvent", "EventPage", "ThreadCleared", "Summary", "Checkpoint",
    "ToolCall", "Document", "Procedure", "Proposal", "PrincipalToken",
]
