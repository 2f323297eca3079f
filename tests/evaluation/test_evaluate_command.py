"""`manage.py evaluate --profile fast`: the whole suite, once, on the real database, model and services.

This is the run `make test` makes of the suite: every metric and adversarial case must be present
and pass. (Its tasks run inline through django-q2's sync mode: memory/evaluation/runner.sync_tasks.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.evaluation.suite import METRICS

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


def test_it_writes_an_html_report_with_a_chart_per_metric(fast_report: dict) -> None:
    page = Path(fast_report["_html"]).read_text()
    assert page.count("<svg") == len(METRICS)
    assert "Adversarial cases" in page


def test_it_leaves_no_tenant_of_the_run_behind(fast_report: dict) -> None:
    from memory.models import Tenant

    assert not Tenant.objects.filter(slug__startswith=fast_report["run_id"]).exists()


def test_it_refuses_an_unknown_scenario(transactional_db: Any) -> None:
    with pytest.raises(CommandError, match="No scenario"):
        call_command("evaluate", "--scenario", "no_such_scenario")


def _cases(report: dict, metric: str) -> list[str]:
    """Every check of a metric, passing or not, is listed in by_scenario counts; failures name cases.
    The passing case names come from the JSON's checks list."""
    return report["metrics"][metric]["extra"]["cases"]
