"""Loading the versioned scenario suite (``scenarios/suite.yaml`` + one file per scenario)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
METRICS = ("write_precision", "write_recall", "useful_retrieval", "noise", "contradiction_handling",
           "isolation", "staleness", "deletion")
_RELATIVE = re.compile(r"^([+-]\d+)([dhm])$")


class SuiteError(ValueError):
    pass


@dataclass
class Scenario:
    name: str
    description: str
    profiles: list[str]
    subjects: list[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    expect: dict[str, Any] = field(default_factory=dict)
    retrieval: list[dict[str, Any]] = field(default_factory=list)
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    deletions: list[dict[str, Any]] = field(default_factory=list)
    threads: list[dict[str, Any]] = field(default_factory=list)
    path: str = ""


@dataclass
class Suite:
    version: int
    must_be_one: list[str]
    thresholds: dict[str, float]
    profiles: dict[str, str]
    scenarios: list[Scenario]


def load_suite(profile: str, *, names: list[str] | None = None, directory: Path = SCENARIO_DIR) -> Suite:
    head = yaml.safe_load((directory / "suite.yaml").read_text())
    if profile not in head["profiles"]:
        raise SuiteError(f"Unknown profile '{profile}'; use one of {', '.join(head['profiles'])}.")
    scenarios = []
    for path in sorted(directory.glob("*.yaml")):
        if path.name == "suite.yaml":
            continue
        raw = yaml.safe_load(path.read_text())
        unknown = set(raw) - set(Scenario.__dataclass_fields__)
        if unknown:
            raise SuiteError(f"{path.name}: unknown key(s) {', '.join(sorted(unknown))}.")
        scenario = Scenario(path=path.name, **raw)
        if not scenario.description.strip():
            raise SuiteError(f"{path.name}: every scenario needs a description.")
        if profile in scenario.profiles and (not names or scenario.name in names):
            scenarios.append(scenario)
    if names and {s.name for s in scenarios} != set(names):
        missing = set(names) - {s.name for s in scenarios}
        raise SuiteError(f"No scenario(s) {', '.join(sorted(missing))} in profile '{profile}'.")
    return Suite(version=int(head["version"]), must_be_one=list(head["must_be_one"]),
                 thresholds={k: float(v) for k, v in head["thresholds"].items()}, profiles=head["profiles"],
                 scenarios=scenarios)


def relative_time(value: str | None, now: dt.datetime) -> str | None:
    """"-3d", "+2h" -> an ISO timestamp relative to the run's start; anything else passes through."""
    if value is None:
        return None
    match = _RELATIVE.match(str(value))
    if not match:
        return str(value)
    amount, unit = int(match.group(1)), match.group(2)
    delta = {"d": dt.timedelta(days=amount), "h": dt.timedelta(hours=amount), "m": dt.timedelta(minutes=amount)}[unit]
    return (now + delta).isoformat()
