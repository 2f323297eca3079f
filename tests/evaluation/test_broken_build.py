"""A deliberately broken build fails the suite: proof that each guarded metric can drop.

Each test switches off ONE real safeguard with pytest's monkeypatch, replacing the real function
with a version that skips its predicate, runs the evaluation, and asserts that the corresponding
metric falls below 1.0 and that the command exits non-zero. This is fault injection into the system
under test, not a mock of it: everything else (database, model, services, API) stays real, and the
patch is undone after each test. The control (the same metrics at 1.0 with every safeguard in place) is
in test_evaluate_command.py, beside the one run of the suite that it reads.

| safeguard switched off                                   | metric that must drop |
|----------------------------------------------------------|-----------------------|
| ``MemoryRecordQuerySet.for_scope``: tenant/subject predicate | isolation          |
| ``MemoryRecordQuerySet.live``: the status/validity filter     | staleness          |
| ``is_tombstoned`` as consolidation calls it                   | deletion           |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.models import MemoryRecordQuerySet


def broken_run(tmp_path: Path, *scenarios: str) -> dict[str, Any]:
    args = [arg for name in scenarios for arg in ("--scenario", name)]
    out = tmp_path / "report.json"
    with pytest.raises(CommandError) as failed:
        # --no-worker: the race's hand-off to a real qcluster process would run unpatched code anyway.
        call_command("evaluate", "--profile", "fast", *args, "--no-worker", "--json", str(out))
    assert failed.value.returncode == 1
    return json.loads(out.read_text())


def test_it_fails_isolation_without_the_scope_predicate(transactional_db: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def for_scope_without_predicate(self: MemoryRecordQuerySet, scope: Any, *,
                                    cross_boundaries: bool = False) -> MemoryRecordQuerySet:
        return self.filter(memory_class__allowed_readers__contains=[scope.reader_role])  # no tenant, no subject

    monkeypatch.setattr(MemoryRecordQuerySet, "for_scope", for_scope_without_predicate)
    report = broken_run(tmp_path, "travel_preference_drift")
    isolation = report["metrics"]["isolation"]
    assert isolation["value"] < 1.0
    assert isolation["ok"] is False
    assert any("another subject, same tenant" in f["case"] for f in isolation["failures"])


def test_it_fails_staleness_without_the_supersession_filter(transactional_db: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MemoryRecordQuerySet, "live", lambda self: self)  # superseded and expired pass
    report = broken_run(tmp_path, "travel_preference_drift", "expiry_and_episodes")
    staleness = report["metrics"]["staleness"]
    assert staleness["value"] < 1.0
    assert {f["scenario"] for f in staleness["failures"]} >= {"travel_preference_drift", "expiry_and_episodes"}


def test_it_fails_deletion_without_the_tombstone_check(transactional_db: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import memory.consolidation.pipeline as pipeline

    monkeypatch.setattr(pipeline, "is_tombstoned", lambda **kwargs: False)
    report = broken_run(tmp_path, "expiry_and_episodes")
    deletion = report["metrics"]["deletion"]
    assert deletion["value"] < 1.0
    assert any(f["case"].startswith("race:") for f in deletion["failures"])
    assert report["adversarial"]["deletion_races_consolidation"]["status"] == "fail"
