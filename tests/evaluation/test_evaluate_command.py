"""`manage.py evaluate --profile fast`: the whole suite, once, on the real database, model and services.

This is the run `make test` makes of the suite: every metric and adversarial case must be present
and pass. The scenario phases run their tasks inline (django-q2's sync mode: runner.sync_tasks); the
deletion race hands its last job to a real `manage.py qcluster` process (memory/evaluation/worker.py).
The HTML report is opened in a real Chromium here too, so that the suite runs once in this file's process;
that test takes docs/screenshots/evaluation-report.png (`make screenshots`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.db import connection

from memory.evaluation.suite import METRICS, SCENARIO_DIR
from tests.conftest import save_screenshot

ADVERSARIAL = {"injected_instructions", "body_scope_change", "poisoned_procedure", "deletion_races_consolidation",
               "secret_in_evidence"}


def test_it_passes_the_fast_suite_with_all_eight_metrics_and_every_adversarial_case(fast_report: dict) -> None:
    assert set(fast_report["metrics"]) == set(METRICS)
    failing = {name: (m["value"], m["failures"][:3]) for name, m in fast_report["metrics"].items() if not m["ok"]}
    assert failing == {}
    for name in ("isolation", "staleness", "deletion"):
        assert fast_report["metrics"][name]["value"] == 1.0
    for name, metric in fast_report["metrics"].items():
        assert metric["total"] > 0, f"{name} measured nothing"
    cases = fast_report["adversarial"]
    assert set(cases) == ADVERSARIAL
    assert {name: c["reason"] for name, c in cases.items() if c["status"] != "pass"} == {}
    assert fast_report["ok"] is True
    assert fast_report["duration_s"] < 180


def test_it_probes_every_read_surface_for_isolation(fast_report: dict) -> None:
    probed = {c.split(":")[1].split()[0] for c in _cases(fast_report, "isolation")}
    assert {"list", "export", "get", "history", "facts", "retrieve", "retrieval", "thread", "thread/events",
            "thread/summaries", "threads"} <= probed
    assert fast_report["metrics"]["isolation"]["total"] >= 100


def test_it_checks_deletion_on_every_surface_and_in_the_database(fast_report: dict) -> None:
    surfaces = " ".join(_cases(fast_report, "deletion"))
    for surface in ("job", "database", "list", "export", "get", "history", "facts", "retrieval log", "retrieve",
                    "thread/events", "race"):
        assert surface in surfaces


def test_it_hands_the_racing_job_to_a_real_worker_process(fast_report: dict) -> None:
    race = fast_report["adversarial"]["deletion_races_consolidation"]
    worker = [d for d in race["details"] if d.startswith("real worker:")]
    assert worker and "became discarded ['tombstoned']" in worker[0] and "qcluster started" in worker[0]
    assert "race: the real worker's delivery" in _cases(fast_report, "deletion")


def test_it_exits_1_when_a_metric_misses_the_threshold_of_its_suite_file(transactional_db: Any,
                                                                          tmp_path: Path) -> None:
    """Not only the must-be-1.0 metrics: noise is 0.33 in this scenario; a suite demanding <= 0.1 fails."""
    suite = tmp_path / "suite"
    shutil.copytree(SCENARIO_DIR, suite)
    head = yaml.safe_load((suite / "suite.yaml").read_text())
    head["thresholds"]["noise_max"] = 0.1
    (suite / "suite.yaml").write_text(yaml.safe_dump(head))
    out = tmp_path / "report.json"
    with pytest.raises(CommandError) as failed:
        call_command("evaluate", "--suite", str(suite), "--scenario", "travel_preference_drift", "--no-worker",
                     "--json", str(out))
    assert failed.value.returncode == 1
    report = json.loads(out.read_text())
    assert {name for name, m in report["metrics"].items() if not m["ok"]} == {"noise"}
    assert report["metrics"]["noise"]["value"] > 0.1
    assert report["metrics"]["noise"]["rule"] == "<= 0.1"
    assert {c["status"] for c in report["adversarial"].values()} == {"pass"}


def test_it_creates_the_cache_table_a_fresh_clone_lacks(transactional_db: Any, tmp_path: Path) -> None:
    """The deletion fan-out purges the database cache: a missing cache table is recreated, not a crash."""
    with connection.cursor() as cursor:
        cursor.execute('DROP TABLE IF EXISTS "engram_cache"')
    out = tmp_path / "report.json"
    call_command("evaluate", "--scenario", "expiry_and_episodes", "--no-worker", "--json", str(out))
    report = json.loads(out.read_text())
    assert report["metrics"]["deletion"]["failures"] == []
    assert report["adversarial"]["deletion_races_consolidation"]["status"] == "pass"


def test_it_exits_2_when_the_run_cannot_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 2 is "could not run", distinct from 1 "ran and failed"."""
    monkeypatch.delenv("ENGRAM_EVAL_KEY", raising=False)
    attempts = [(["--suite", str(tmp_path)], "no suite.yaml"), (["--scenario", "no_such_scenario"], "No scenario"),
                (["--via-api", "http://127.0.0.1:9"], "needs --api-key"),
                (["--via-api", "http://127.0.0.1:9", "--api-key", "egk_x"], "127.0.0.1:9")]
    for args, message in attempts:
        with pytest.raises(CommandError, match=message) as refused:
            call_command("evaluate", *args)
        assert refused.value.returncode == 2, args


def test_it_writes_an_html_report_with_a_chart_per_metric(fast_report: dict) -> None:
    page = Path(fast_report["_html"]).read_text()
    assert page.count("<svg") == len(METRICS)
    assert "Adversarial cases" in page


def test_it_leaves_no_tenant_of_the_run_behind(fast_report: dict) -> None:
    from memory.models import Tenant

    assert not Tenant.objects.filter(slug__startswith=fast_report["run_id"]).exists()


def _cases(report: dict, metric: str) -> list[str]:
    """Every check of a metric, passing or not, is listed in by_scenario counts; failures name cases.
    The passing case names come from the JSON's checks list."""
    return report["metrics"][metric]["extra"]["cases"]


def test_the_metrics_the_broken_builds_break_pass_with_the_safeguards_in_place(fast_report: dict) -> None:
    """The control of test_broken_build.py: the unbroken build passes the metrics those tests break."""
    for name in ("isolation", "staleness", "deletion"):
        assert fast_report["metrics"][name]["value"] == 1.0


@pytest.mark.browser
def test_it_opens_the_html_report_in_chromium(fast_report: dict, page: Any) -> None:
    page.goto(Path(fast_report["_html"]).as_uri())
    assert "PASS" in page.locator("h1").inner_text()
    assert page.locator("#summary tr").count() == len(METRICS) + 1
    for name in METRICS:
        chart = page.locator(f"#metric-{name} svg")
        assert chart.is_visible()
        assert chart.bounding_box()["height"] > 40
    rows = page.locator("#adversarial tr")
    assert rows.count() == 6
    assert page.locator("#adversarial td.pass").count() == 5
    assert page.locator("#failing").inner_text() == "None."
    assert save_screenshot(page, "evaluation-report.png", full_page=True).stat().st_size > 20_000
