"""The everyday paraphrase development set (bench/paraphrase_set.yaml), scored through the HTTP API.

Run by ``bench/locomo.py --paraphrase`` (``make bench-recall``) against the server it started: one tenant, one
subject per person of the set, every fact one memory through ``POST /api/v1/memories/batch`` (``embed: now``), then
every question verbatim (``limit`` 10, ``budget_tokens`` 4000). It reports top-1 and top-3, the empty answers of
questions whose answer is stored, the strong/weak marks, and for the no-match questions how many got a strong packet
and how many packets they got. The baseline in the same run is exact MiniLM alone: numpy cosine between the
question's and the facts' vectors from the same embedder, over the same facts.

Before anything is scored the set is checked: every question must share no content word with its answer
(bench/paraphrase_words.py); a set that fails is refused.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paraphrase_words import shared  # noqa: E402

SET = Path(__file__).resolve().parent / "paraphrase_set.yaml"


def load(path: Path = SET) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    problems = []
    for name, subject in data["subjects"].items():
        for q in subject["questions"]:
            if q["a"] not in subject["facts"]:
                problems.append(f"{name}: '{q['q']}' names no fact '{q['a']}'")
            elif words := shared(q["q"], subject["facts"][q["a"]]):
                problems.append(f"{name}: '{q['q']}' shares {sorted(words)} with its answer")
    if problems:
        raise SystemExit("The paraphrase set is not valid:\n  " + "\n  ".join(problems))
    return data


def describe(data: dict[str, Any]) -> dict[str, int]:
    subjects = data["subjects"].values()
    questions = [(s, q) for s in subjects for q in s["questions"]]
    return {"subjects": len(data["subjects"]), "facts": sum(len(s["facts"]) for s in subjects),
            "questions": len(questions), "no_match": sum(len(s["no_match"]) for s in subjects),
            "with_distractor": sum(1 for s, q in questions
                                   if any(k != q["a"] and shared(q["q"], t) for k, t in s["facts"].items()))}


def minilm_alone(data: dict[str, Any]) -> dict[str, Any]:
    """Exact cosine over each subject's facts with the project's embedder: the baseline."""
    import numpy as np

    from memory.embedder import get_embedder

    embedder = get_embedder()
    top1 = top3 = 0
    for subject in data["subjects"].values():
        keys = list(subject["facts"])
        facts = np.array(embedder.embed([subject["facts"][k] for k in keys]))
        for q in subject["questions"]:
            order = np.argsort(-(facts @ np.array(embedder.embed_query(q["q"]))), kind="stable")
            rank = [keys[i] for i in order].index(q["a"])
            top1 += rank == 0
            top3 += rank < 3
    return {"top1": int(top1), "top3": int(top3)}


def run(port: int, http_call: Any, headers_for: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Write the facts through the API and ask every question; ``headers_for(name)`` gives a subject's headers."""
    ids: dict[tuple[str, str], str] = {}
    for name, subject in data["subjects"].items():
        items = [{"namespace": ["user", "profile"], "kind": "profile", "type": "semantic",
                  "fact": {"field": key, "value": text}, "text": text,
                  "source": {"type": "explicit_user_statement", "event_id": f"evt_para_{name}_{key}"}}
                 for key, text in subject["facts"].items()]
        code, body, _ = http_call(port, "POST", "/api/v1/memories/batch", headers_for(name),
                                  {"items": items, "embed": "now"})
        assert code == 200 and body["error"] == 0, body
        for key, result in zip(subject["facts"], body["results"], strict=True):
            ids[(name, result["record"]["memory_id"])] = key
    out: dict[str, Any] = {"top1": 0, "top3": 0, "empty": 0, "strong_first": 0, "weak_first": 0,
                           "no_match_with_strong": 0, "no_match_packets": 0, "no_match_empty": 0, "misses": []}
    latencies = []
    for name, subject in data["subjects"].items():
        for q in subject["questions"]:
            code, body, ms = http_call(port, "POST", "/api/v1/retrieve", headers_for(name),
                                       {"query": q["q"], "limit": 10, "budget_tokens": 4000})
            assert code == 200, body
            latencies.append(ms)
            packets = body["packets"]
            found = [ids.get((name, p["memory_id"])) for p in packets]
            out["top1"] += found[:1] == [q["a"]]
            out["top3"] += q["a"] in found[:3]
            out["empty"] += not packets
            if packets:
                out["strong_first" if packets[0]["match"] == "strong" else "weak_first"] += 1
            if found[:1] != [q["a"]]:
                out["misses"].append({"subject": name, "question": q["q"], "answer": q["a"], "got": found[:3]})
        for question in subject["no_match"]:
            code, body, _ = http_call(port, "POST", "/api/v1/retrieve", headers_for(name),
                                      {"query": question, "limit": 10, "budget_tokens": 4000})
            assert code == 200, body
            out["no_match_with_strong"] += any(p["match"] == "strong" for p in body["packets"])
            out["no_match_packets"] += len(body["packets"])
            out["no_match_empty"] += not body["packets"]
    out["http_p50_ms"] = round(sorted(latencies)[len(latencies) // 2], 1)
    out["at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return out
