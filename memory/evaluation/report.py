"""Output: a rich terminal table, the JSON report, and a self-contained HTML report with one chart
per metric (matplotlib, rendered to inline SVG) and every failing case."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

from memory.evaluation.results import MetricResult, Report

TITLES = {
    "write_precision": "Write precision", "write_recall": "Write recall", "useful_retrieval": "Useful retrieval",
    "noise": "Noise", "contradiction_handling": "Contradiction handling", "isolation": "Isolation",
    "staleness": "Staleness", "deletion": "Deletion",
}


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def print_table(report: Report, console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"Engram evaluation · suite v{report.suite_version} · profile {report.profile} · "
                        f"{report.mode}")
    for column in ("metric", "value", "count", "rule", "result", "first failure"):
        table.add_column(column, overflow="fold")
    for m in report.metrics:
        value = fmt(m.value)
        if m.name == "useful_retrieval":
            value = f"hit@k {fmt(m.extra.get('hit_at_k'))} · recall@k {fmt(m.extra.get('recall_at_k'))}"
        count = f"{m.passed}/{m.total}" + (" tokens" if m.name == "noise" else "")
        first = m.failures[0]["case"] + ": " + m.failures[0]["reason"] if m.failures else ""
        table.add_row(TITLES[m.name], value, count, m.rule, "[green]pass[/]" if m.ok else "[red]FAIL[/]",
                      first[:120])
    console.print(table)
    cases = Table(title="Adversarial cases")
    for column in ("case", "result", "reason"):
        cases.add_column(column, overflow="fold")
    colours = {"pass": "green", "fail": "red", "skipped": "yellow"}
    for c in report.adversarial:
        cases.add_row(c.title, f"[{colours[c.status]}]{c.status}[/]", c.reason)
    console.print(cases)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}")
    verdict = "[green]PASS[/]" if report.ok else "[red]FAIL[/]"
    console.print(f"{verdict} in {report.duration_s:.1f} s (run {report.run_id})")


def write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(report.as_dict(), indent=2, ensure_ascii=False, default=str))


def _chart(m: MetricResult) -> str:
    """One small bar chart: the metric per scenario against its rule's line, as inline SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = m.extra.get("by_scenario") or {}
    names = list(rows) or ["(none)"]
    values = [(a / b if b else 0.0) for a, b in rows.values()] or [0.0]
    fig, ax = plt.subplots(figsize=(5.2, 0.45 * len(names) + 0.9), dpi=100)
    bad = [(v > _limit(m)) if m.name == "noise" else (v < _limit(m)) for v in values]
    ax.barh(names, values, color=["#c0392b" if b else "#2e8b57" for b in bad])
    ax.axvline(_limit(m), color="#333", linestyle="--", linewidth=1)
    ax.set_xlim(0, 1.05)
    ax.invert_yaxis()
    ax.tick_params(labelsize=8)
    label = "share of tokens on irrelevant records" if m.name == "noise" else (
        "hit@k per scenario" if m.name == "useful_retrieval" else "passed share per scenario")
    ax.set_xlabel(label, fontsize=8)
    for i, v in enumerate(values):
        ax.text(min(v + 0.01, 0.92), i, f"{v:.2f}", va="center", fontsize=7)
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]


def _limit(m: MetricResult) -> float:
    try:
        return float(m.rule.split()[1].rstrip(","))
    except (IndexError, ValueError):
        return 1.0


def write_html(report: Report, path: Path) -> None:
    e = html.escape
    parts = [f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Engram evaluation {e(report.run_id)}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }}
h1 {{ font-size: 1.5rem; }} table {{ border-collapse: collapse; width: 100%; margin: 1rem 0; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .35rem .5rem; text-align: left; vertical-align: top; }}
.pass {{ color: #1e7b45; font-weight: 600; }} .fail {{ color: #b03a2e; font-weight: 600; }}
.skipped {{ color: #9a7d0a; font-weight: 600; }}
.metrics {{ display: grid; grid-template-columns: repeat(2, 1fr); gap: 1rem; }}
.metric {{ border: 1px solid #ddd; border-radius: 6px; padding: .75rem; }}
.metric h3 {{ margin: 0 0 .25rem; font-size: 1rem; }} .metric svg {{ width: 100%; height: auto; }}
.big {{ font-size: 1.6rem; font-weight: 700; }} small {{ color: #666; }}
</style></head><body>
<h1>Engram evaluation: <span class="{'pass' if report.ok else 'fail'}">{'PASS' if report.ok else 'FAIL'}</span></h1>
<p>Suite v{report.suite_version} · profile <b>{e(report.profile)}</b> · {e(report.mode)} · run {e(report.run_id)} ·
started {e(report.started_at)} · {report.duration_s:.1f} s</p>
<h2>Metrics</h2><table id="summary"><tr><th>metric</th><th>value</th><th>count</th><th>rule</th><th>result</th></tr>"""]
    for m in report.metrics:
        value = fmt(m.value)
        if m.name == "useful_retrieval":
            value = f"hit@k {fmt(m.extra.get('hit_at_k'))} · recall@k {fmt(m.extra.get('recall_at_k'))}"
        result = "pass" if m.ok else "fail"
        parts.append(f"<tr><td>{TITLES[m.name]}</td><td>{value}</td><td>{m.passed}/{m.total}</td>"
                     f"<td>{e(m.rule)}</td><td class='{result}'>{result}</td></tr>")
    parts.append("</table><div class='metrics'>")
    for m in report.metrics:
        result = "pass" if m.ok else "fail"
        parts.append(f"<section class='metric' id='metric-{m.name}'><h3>{TITLES[m.name]} "
                     f"<span class='{result}'>{result}</span></h3><div class='big'>{fmt(m.value)}</div>"
                     f"<small>{m.passed}/{m.total} · rule {e(m.rule)}</small>{_chart(m)}</section>")
    parts.append("</div><h2>Adversarial cases</h2><table id='adversarial'><tr><th>case</th><th>result</th>"
                 "<th>reason</th><th>details</th></tr>")
    for c in report.adversarial:
        details = "<br>".join(e(d[:300]) for d in c.details)
        parts.append(f"<tr><td>{e(c.title)}</td><td class='{c.status}'>{c.status}</td><td>{e(c.reason)}</td>"
                     f"<td><small>{details}</small></td></tr>")
    parts.append("</table><h2>Failing cases</h2>")
    failing = [(m, f) for m in report.metrics for f in m.failures if not (m.name == "noise" and m.ok)]
    if not failing:
        parts.append("<p id='failing'>None.</p>")
    else:
        parts.append("<table id='failing'><tr><th>metric</th><th>scenario</th><th>case</th><th>reason</th></tr>")
        for m, f in failing:
            parts.append(f"<tr><td>{TITLES[m.name]}</td><td>{e(f['scenario'])}</td><td>{e(f['case'])}</td>"
                         f"<td>{e(f['reason'])}</td></tr>")
        parts.append("</table>")
    parts.append("<h2>Scenarios</h2><table><tr><th>scenario</th><th>description</th></tr>")
    for s in report.scenarios:
        parts.append(f"<tr><td>{e(s['name'])}</td><td>{e(s['description'])}</td></tr>")
    parts.append("</table>")
    if report.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>")
    parts.append("<p><small>Metric definitions: docs/evaluation.md</small></p></body></html>")
    path.write_text("\n".join(parts))
