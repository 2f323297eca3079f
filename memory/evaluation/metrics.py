"""The eight metrics, computed from the runner's observations (definitions: docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory.evaluation.results import Check, MetricResult
from memory.evaluation.runner import Observations
from memory.evaluation.suite import Suite


def _ratio(checks: list[Check]) -> tuple[float | None, int, int]:
    passed = sum(1 for c in checks if c.passed)
    return (passed / len(checks) if checks else None), passed, len(checks)


def _failures(checks: list[Check]) -> list[dict[str, str]]:
    return [{"scenario": c.scenario, "case": c.case, "reason": c.reason} for c in checks if not c.passed]


def _by_scenario(checks: list[Check]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for c in checks:
        entry = out.setdefault(c.scenario, [0, 0])
        entry[0] += int(c.passed)
        entry[1] += 1
    return out


def _from_checks(name: str, checks: list[Check], suite: Suite) -> MetricResult:
    value, passed, total = _ratio(checks)
    if name in suite.must_be_one:
        rule, minimum = "== 1.0", 1.0
    else:
        minimum = suite.thresholds.get(name, 1.0)
        rule = f">= {minimum:g}"
    ok = value is None or value >= minimum
    return MetricResult(name=name, value=value, passed=passed, total=total, rule=rule, ok=ok,
                        failures=_failures(checks),
                        extra={"by_scenario": _by_scenario(checks), "cases": [c.case for c in checks]})


def compute(obs: Observations, suite: Suite) -> list[MetricResult]:
    metrics = [
        _from_checks("write_precision", obs.precision, suite),
        _from_checks("write_recall", obs.recall, suite),
        _useful_retrieval(obs, suite),
        _noise(obs, suite),
        _from_checks("contradiction_handling", obs.contradictions, suite),
        _from_checks("isolation", obs.isolation, suite),
        _from_checks("staleness", obs.staleness, suite),
        _from_checks("deletion", obs.deletion, suite),
    ]
    return metrics


def _useful_retrieval(obs: Observations, suite: Suite) -> MetricResult:
    queries = [q for q in obs.retrieval if q["relevant"]]
    # Questions about something the subject never said: passed when no packet is a strong match.
    no_match = [q for q in obs.retrieval if q.get("no_match")]
    strong_on_no_match = [q for q in no_match if q["strong"]]
    hits = sum(1 for q in queries if q["hit"])
    hit_at_k = hits / len(queries) if queries else None
    recall_at_k = sum(q["recall"] for q in queries) / len(queries) if queries else None
    min_hit = suite.thresholds.get("useful_retrieval_hit", 1.0)
    min_recall = suite.thresholds.get("useful_retrieval_recall", 1.0)
    ok = (hit_at_k is None or (hit_at_k >= min_hit and (recall_at_k or 0.0) >= min_recall)) and not strong_on_no_match
    failures = [{"scenario": q["scenario"], "case": q["query"],
                 "reason": f"{q['found']} of {q['relevant']} relevant in the top {q['k']}; got {q['returned']}"}
                for q in queries if q["found"] < q["relevant"]]
    failures += [{"scenario": q["scenario"], "case": q["query"],
                  "reason": f"never said, yet {q['strong']} strong match(es): {q['returned']}"}
                 for q in strong_on_no_match]
    return MetricResult(name="useful_retrieval", value=hit_at_k, passed=hits, total=len(queries),
                        rule=f"hit@k >= {min_hit:g}, recall@k >= {min_recall:g}", ok=ok, failures=failures,
                        extra={"hit_at_k": hit_at_k, "recall_at_k": recall_at_k,
                               "empty_answers": sum(1 for q in queries if not q["returned"]),
                               "no_match": {"queries": len(no_match), "with_strong": len(strong_on_no_match),
                                            "weak_tokens": sum(q["tokens_used"] for q in no_match)},
                               "by_scenario": _grouped(queries, lambda q: (int(q["hit"]), 1))})


def _noise(obs: Observations, suite: Suite) -> MetricResult:
    # Noise is measured on questions that have an answer; a no-match question's weak packets are reported with
    # useful retrieval (``no_match``), where a strong one fails the metric.
    answered = [q for q in obs.retrieval if not q.get("no_match")]
    used = sum(q["tokens_used"] for q in answered)
    irrelevant = sum(q["tokens_irrelevant"] for q in answered)
    value = irrelevant / used if used else None
    maximum = suite.thresholds.get("noise_max", 0.0)
    noisy = [q for q in answered if q["tokens_irrelevant"]]
    failures = [{"scenario": q["scenario"], "case": q["query"],
                 "reason": f"{q['tokens_irrelevant']} of {q['tokens_used']} tokens on irrelevant records"}
                for q in noisy]
    return MetricResult(name="noise", value=value, passed=used - irrelevant, total=used, rule=f"<= {maximum:g}",
                        ok=value is None or value <= maximum, failures=failures,
                        extra={"unit": "tokens", "queries_with_noise": len(noisy), "queries": len(answered),
                               "by_scenario": _grouped(answered,
                                                       lambda q: (q["tokens_irrelevant"], q["tokens_used"]))})


def _grouped(rows: list[dict[str, Any]], pair: Callable[[dict[str, Any]], tuple[int, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for row in rows:
        a, b = pair(row)
        entry = out.setdefault(row["scenario"], [0, 0])
        entry[0] += a
        entry[1] += b
    return out
