"""One evaluation run: realm -> scenarios -> adversarial cases -> metrics -> Report."""

from __future__ import annotations

import datetime as dt
import time

from memory.evaluation.adversarial import Adversary
from memory.evaluation.metrics import compute
from memory.evaluation.realm import Realm
from memory.evaluation.results import Report
from memory.evaluation.runner import Progress, ScenarioRunner, sync_tasks
from memory.evaluation.suite import Suite


def run_evaluation(*, realm: Realm, suite: Suite, profile: str, mode: str, keep: bool = False,
                   worker: bool = True, progress: Progress | None = None) -> Report:
    started = time.monotonic()
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    notes: list[str] = []
    try:
        with sync_tasks(realm.in_process):
            runner = ScenarioRunner(realm, suite, progress)
            obs = runner.run()
            if progress:
                progress("adversarial cases")
            cases = Adversary(realm, obs, worker=worker).run()
    finally:
        if keep:
            notes.append(f"tenants/subjects kept for inspection: {realm.run_id}-*")
        else:
            notes += realm.cleanup()
    metrics = compute(obs, suite)
    return Report(suite_version=suite.version, profile=profile, mode=mode, run_id=realm.run_id,
                  started_at=started_at, duration_s=round(time.monotonic() - started, 2),
                  scenarios=[{"name": s.name, "description": " ".join(s.description.split()), "file": s.path}
                             for s in suite.scenarios],
                  metrics=metrics, adversarial=cases, notes=obs.notes + notes)
