"""What a run produces: one MetricResult per metric and one CaseResult per adversarial case."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Check:
    """One observation that counts towards a metric: passed or not, and why."""

    scenario: str
    case: str
    passed: bool
    reason: str = ""


@dataclass
class MetricResult:
    name: str
    value: float | None  # None: nothing to measure in this profile
    passed: int
    total: int
    rule: str  # "== 1.0", ">= 0.9", "<= 0.5"
    ok: bool
    failures: list[dict[str, str]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseResult:
    name: str
    title: str
    status: str  # "pass", "fail" or "skipped"
    reason: str
    details: list[str] = field(default_factory=list)


@dataclass
class Report:
    suite_version: int
    profile: str
    mode: str  # "in-process" or "via-api <url>"
    run_id: str
    started_at: str
    duration_s: float
    scenarios: list[dict[str, str]]
    metrics: list[MetricResult]
    adversarial: list[CaseResult]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.metrics) and all(c.status != "fail" for c in self.adversarial)

    def as_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body["ok"] = self.ok
        body["metrics"] = {m.name: asdict(m) for m in self.metrics}
        body["adversarial"] = {c.name: asdict(c) for c in self.adversarial}
        return body
