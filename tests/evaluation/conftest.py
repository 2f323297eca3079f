"""The fast suite runs once per test session; the tests that read its report share the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

_RUNS: dict[tuple[str, ...], dict[str, Any]] = {}


def run_evaluate(out: Path, *args: str) -> dict[str, Any]:
    """call_command("evaluate", ...) with --json/--html into ``out``; returns the parsed JSON report."""
    key = tuple(args)
    if key not in _RUNS:
        out.mkdir(parents=True, exist_ok=True)
        call_command("evaluate", *args, "--json", str(out / "report.json"), "--html", str(out / "report.html"),
                     "--no-fail")
        report = json.loads((out / "report.json").read_text())
        report["_html"] = str(out / "report.html")
        _RUNS[key] = report
    return _RUNS[key]


@pytest.fixture
def fast_report(transactional_db: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_evaluate(tmp_path_factory.getbasetemp() / "evaluation-fast", "--profile", "fast")
