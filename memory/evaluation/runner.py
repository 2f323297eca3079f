"""Playing the scenarios and collecting the checks each metric is computed from.

Phases, in order (each one reads what the earlier ones wrote): writes (+ consolidation, which runs
inline: see ``sync_tasks``) and reviewer approvals -> write precision/recall from the owners' active
records -> retrieval (hit@k, recall@k, noise) -> contradictions (exact facts) -> staleness ->
isolation probes on every read surface -> deletions, then every read surface again -> cleanup.
The adversarial cases (memory/evaluation/adversarial.py) run after the scenarios.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memory.evaluation.client import Principal, Response
from memory.evaluation.realm import Realm, Unsupported
from memory.evaluation.results import Check
from memory.evaluation.storage import marker_counts, new_hits
from memory.evaluation.suite import Scenario, Suite, relative_time

Progress = Callable[[str], None]
DELETION_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 60.0


@contextlib.contextmanager
def sync_tasks(enabled: bool) -> Iterator[None]:
    """Run django-q2 tasks inline (``Conf.SYNC``), in process only.

    ``async_task`` is called on commit by the write paths (embedding, consolidation, deletion fan-out);
    with SYNC the very task functions the qcluster worker would run execute right after the commit, in
    this process. That makes the fast profile deterministic and quick; tests/evaluation also runs the
    deletion race through the real functions. ``--via-api`` uses the server's own worker instead.
    """
    if not enabled:
        yield
        return
    from django_q.conf import Conf

    previous = Conf.SYNC
    Conf.SYNC = True
    try:
        yield
    finally:
        Conf.SYNC = previous


@contextlib.contextmanager
def queued_tasks() -> Iterator[None]:
    """The opposite of ``sync_tasks``: tasks go to the broker and wait there (the race case drives one
    consolidation job by hand)."""
    from django_q.conf import Conf

    previous = Conf.SYNC
    Conf.SYNC = False
    try:
        yield
    finally:
        Conf.SYNC = previous


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def fact_key(namespace: Any, field_name: str, value: Any) -> tuple[str, str, str]:
    ns = "/".join(namespace) if isinstance(namespace, list) else str(namespace)
    return ns, field_name, canonical(value)


def contains_any(payload: Any, needles: list[str]) -> list[str]:
    text = json.dumps(payload, ensure_ascii=False, default=str).lower() if payload is not None else ""
    return [n for n in needles if n and n.lower() in text]


@dataclass
class Observations:
    """Everything the metrics are computed from."""

    precision: list[Check] = field(default_factory=list)
    recall: list[Check] = field(default_factory=list)
    retrieval: list[dict[str, Any]] = field(default_factory=list)  # per query: hit, recall, tokens
    contradictions: list[Check] = field(default_factory=list)
    staleness: list[Check] = field(default_factory=list)
    isolation: list[Check] = field(default_factory=list)
    deletion: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Owner:
    """A scenario subject: its principal and what it wrote (for probes and deletion checks)."""

    scenario: str
    name: str
    principal: Principal
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> record payload
    candidates: dict[str, str] = field(default_factory=dict)  # label -> candidate id
    retrievals: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    erased: bool = False


class ScenarioRunner:
    def __init__(self, realm: Realm, suite: Suite, progress: Progress | None = None) -> None:
        self.realm = realm
        self.suite = suite
        self.progress = progress or (lambda _msg: None)
        self.obs = Observations()
        self.owners: dict[tuple[str, str], Owner] = {}
        self.now = dt.datetime.now(dt.UTC)

    # --- helpers -----------------------------------------------------------------------------------
    def external_id(self, scenario: Scenario, subject: str) -> str:
        return f"{self.realm.run_id}-{scenario.name}-{subject}"[:128]

    def owner(self, scenario: Scenario, subject: str) -> Owner:
        return self.owners[(scenario.name, subject)]

    def event_id(self, scenario: Scenario, label: str) -> str:
        return f"{self.realm.run_id}-{scenario.name}-{label}"[:128]

    def memory_id(self, scenario: Scenario, subject: str, label: str) -> str | None:
        record = self.owner(scenario, subject).memories.get(label)
        return record.get("memory_id") if record else None

    # --- phases ------------------------------------------------------------------------------------
    def run(self) -> Observations:
        self.baseline: dict[str, dict[str, int]] = {}
        if self.realm.in_process:
            for scenario in self.suite.scenarios:
                for spec in scenario.deletions:
                    for marker in spec.get("markers", []):
                        self.baseline[marker] = marker_counts(marker)
        for scenario in self.suite.scenarios:
            for subject in scenario.subjects:
                principal = self.realm.principal("a", self.external_id(scenario, subject))
                self.owners[(scenario.name, subject)] = Owner(scenario.name, subject, principal)
        phases: list[tuple[str, Callable[[Scenario], None]]] = [
            ("writes", self.play_writes), ("threads", self.play_threads), ("worker", self.settle),
            ("precision/recall", self.measure_writes),
            ("retrieval", self.measure_retrieval), ("contradictions", self.measure_contradictions),
            ("staleness", self.measure_staleness),
        ]
        for label, phase in phases:
            for scenario in self.suite.scenarios:
                self.progress(f"{label}: {scenario.name}")
                self._guarded(label, scenario.name, phase, scenario)
        self.progress("isolation probes")
        self._guarded("isolation", "all", self.probe_isolation)
        for scenario in self.suite.scenarios:
            self.progress(f"deletion: {scenario.name}")
            self._guarded("deletion", scenario.name, self.measure_deletions, scenario)
        return self.obs

    def _guarded(self, label: str, scenario: str, step: Callable[..., None], *args: Any) -> None:
        """A phase that crashes (an unexpected answer under a broken build) is a failing check of its
        metric, with the reason, never an aborted run."""
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001
            reason = f"crashed: {type(exc).__name__}: {exc}"[:300]
            if label == "retrieval":  # useful retrieval counts queries: a crashed phase is a missed one
                self.obs.retrieval.append({
                    "scenario": scenario, "query": "retrieval phase", "k": 0, "status": 0, "relevant": 1,
                    "found": 0, "hit": False, "recall": 0.0, "tokens_used": 0, "tokens_irrelevant": 0,
                    "returned": [reason]})
                return
            target = {"writes": self.obs.precision, "threads": self.obs.isolation, "worker": self.obs.recall,
                      "precision/recall": self.obs.precision,
                      "contradictions": self.obs.contradictions, "staleness": self.obs.staleness,
                      "isolation": self.obs.isolation, "deletion": self.obs.deletion}[label]
            target.append(Check(scenario, f"{label} phase", False, reason))

    def _body(self, scenario: Scenario, event: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "namespace": event["namespace"].split("/"), "kind": event.get("kind", "note"),
            "fact": {"field": event["field"], "value": event["value"]},
            "text": event.get("text") or f"{event['field']}: {event['value']}",
            "source": {"event_id": self.event_id(scenario, event["id"])},
        }
        if event.get("type"):
            body["type"] = event["type"]
        if event.get("say"):
            body["source"]["text"] = event["say"]
        if event.get("source_type"):
            body["source"]["type"] = event["source_type"]
        for name in ("valid_from", "valid_until"):
            if event.get(name):
                body[name] = relative_time(event[name], self.now)
        if event.get("evidence"):
            body["evidence"] = event["evidence"]
        return body

    def play_writes(self, scenario: Scenario) -> None:
        paths = {"memory": ("/memories", 201), "outcome": ("/outcomes", 201), "candidate": ("/candidates", 202)}
        for event in scenario.events:
            owner = self.owner(scenario, event["subject"])
            path, default_status = paths[event["path"]]
            response = owner.principal.post(path, self._body(scenario, event))
            expected = int(event.get("expect_status", default_status))
            if response.status != expected or (event.get("expect_code") and response.code != event["expect_code"]):
                self.obs.precision.append(Check(scenario.name, f"write {event['id']}", False,
                                                f"expected {expected} {event.get('expect_code', '')}, got "
                                                f"{response.status} {response.code}".strip()))
            if response.status >= 300:
                continue
            if event["path"] == "candidate":
                owner.candidates[event["id"]] = response.body["candidate_id"]
                if event.get("approve"):
                    self._approve(scenario, owner, event)
            else:
                owner.memories[event["id"]] = response.body

    def _approve(self, scenario: Scenario, owner: Owner, event: dict[str, Any]) -> None:
        candidate_id = owner.candidates[event["id"]]
        try:
            memory_id = self.realm.approve(candidate_id)
        except Unsupported as exc:
            self.obs.notes.append(f"{scenario.name}/{event['id']}: approval skipped ({exc})")
            return
        except Exception as exc:  # noqa: BLE001 - a refused approval is an observation, not a crash
            self.obs.recall.append(Check(scenario.name, f"approve {event['id']}", False,
                                         f"approval failed: {type(exc).__name__}: {exc}"))
            return
        got = owner.principal.get(f"/memories/{memory_id}")
        if got.status == 200:
            owner.memories[event["id"]] = got.body

    def play_threads(self, scenario: Scenario) -> None:
        for spec in scenario.threads:
            owner = self.owner(scenario, spec["subject"])
            created = owner.principal.post("/threads", {"title": spec.get("title", "")})
            if created.status != 201:
                self.obs.notes.append(f"{scenario.name}: thread create answered {created.status}")
                continue
            thread_id = created.body.get("thread_id") or created.body.get("id")
            owner.threads.append(thread_id)
            for item in spec.get("events", []):
                owner.principal.post(f"/threads/{thread_id}/events",
                                     {"kind": "message", "role": item.get("role", "user"), "text": item["text"]})
            if spec.get("summarize"):
                summary = owner.principal.post(f"/threads/{thread_id}/summarize", {})
                if summary.status != 201:
                    self.obs.notes.append(f"{scenario.name}: summarize answered {summary.status}")

    def settle(self, scenario: Scenario) -> None:
        """Over the API the server's worker runs consolidation and embedding after each write: wait until
        no candidate of the scenario's subjects is pending and no record awaits its embedding. (In process
        the tasks already ran inline.)"""
        if self.realm.in_process:
            return
        for subject in scenario.subjects:
            owner = self.owner(scenario, subject)
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while True:
                export = owner.principal.get("/export")
                candidates = export.body.get("candidates", []) if export.status == 200 else []
                pending = [c for c in candidates if c.get("status") == "pending"]
                probe = owner.principal.post("/retrieve", {"query": "settle", "limit": 1})
                waiting = probe.body.get("dropped", {}).get("semantic_pending", 0) if probe.status == 200 else 0
                if not pending and not waiting:
                    break
                if time.monotonic() > deadline:
                    self.obs.notes.append(f"{scenario.name}/{subject}: the worker left {len(pending)} candidates "
                                          f"pending and {waiting} embeddings missing after {SETTLE_TIMEOUT_S:.0f} s")
                    break
                time.sleep(0.3)

    def _active_confirmed(self, owner: Owner) -> list[dict[str, Any]]:
        response = owner.principal.get("/memories", status="active", limit=200)
        if response.status != 200:
            return []
        return [r for r in response.body["results"] if r.get("confidence") == "confirmed"]

    def measure_writes(self, scenario: Scenario) -> None:
        expected: dict[str, set[tuple[str, str, str]]] = {}
        for item in scenario.expect.get("confirmed", []):
            if item.get("needs") == "review" and not self.realm.in_process:
                continue  # approvals are not reachable over the agent API
            key = fact_key(item["namespace"], item["field"], item["value"])
            expected.setdefault(item["subject"], set()).add(key)
        for subject in scenario.subjects:
            owner = self.owner(scenario, subject)
            want = expected.get(subject, set())
            stored = {fact_key(r["namespace"], r["fact"]["field"], r["fact"].get("value")): r
                      for r in self._active_confirmed(owner)}
            for key, record in stored.items():
                ok = key in want
                self.obs.precision.append(Check(scenario.name, f"{subject}: {key[0]}.{key[1]}={key[2]}", ok,
                                                "" if ok else f"stored as a confirmed fact but not expected "
                                                              f"(source {record.get('source', {}).get('type')})"))
            for key in want:
                ok = key in stored
                self.obs.recall.append(Check(scenario.name, f"{subject}: {key[0]}.{key[1]}={key[2]}", ok,
                                             "" if ok else "expected confirmed fact is not active"))

    def _retrieve(self, owner: Owner, query: str, k: int, budget: int) -> Response:
        response = owner.principal.post("/retrieve", {"query": query, "limit": k, "budget_tokens": budget})
        if response.status == 200:
            owner.retrievals.append(response.body["retrieval_id"])
        return response

    def measure_retrieval(self, scenario: Scenario) -> None:
        for spec in scenario.retrieval:
            owner = self.owner(scenario, spec["subject"])
            k = int(spec.get("k", 3))
            relevant = {self.memory_id(scenario, spec["subject"], label) for label in spec["relevant"]} - {None}
            response = self._retrieve(owner, spec["query"], k, int(spec.get("budget_tokens", 400)))
            packets = response.body.get("packets", []) if response.status == 200 else []
            top = packets[:k]
            found = {p.get("memory_id") for p in top} & relevant
            irrelevant_tokens = sum(int(p.get("tokens") or 0) for p in packets if p.get("memory_id") not in relevant)
            used = sum(int(p.get("tokens") or 0) for p in packets)
            self.obs.retrieval.append({
                "scenario": scenario.name, "query": spec["query"], "k": k, "status": response.status,
                "relevant": len(relevant), "found": len(found), "hit": bool(found),
                "recall": (len(found) / len(relevant)) if relevant else 0.0,
                "tokens_used": used, "tokens_irrelevant": irrelevant_tokens,
                "returned": [p.get("fact") or p.get("text") for p in packets],
                # A question about something never said: no packet may be a strong match.
                "no_match": bool(spec.get("no_match")),
                "strong": sum(1 for p in packets if p.get("match") == "strong"),
            })

    def measure_contradictions(self, scenario: Scenario) -> None:
        for spec in scenario.contradictions:
            owner = self.owner(scenario, spec["subject"])
            response = owner.principal.get("/facts", namespace=spec["namespace"], field=spec["field"])
            case = f"{spec['namespace']}.{spec['field']} ({spec.get('why', '')})"
            if spec["expect"] == "conflict":
                records = response.body.get("records", []) if isinstance(response.body, dict) else []
                values = {canonical(r["fact"].get("value")) for r in records}
                ok = response.status == 409 and response.code == "conflict" and len(values) >= 2
                reason = "" if ok else f"expected 409 conflict with both records, got {response.status} " \
                                       f"{response.code} ({len(values)} distinct values)"
            else:
                want = spec["expect"]["value"]
                got = response.body.get("fact", {}).get("value") if response.status == 200 else None
                ok = response.status == 200 and canonical(got) == canonical(want)
                reason = "" if ok else f"expected {want!r}, got {response.status} {got!r}"
            self.obs.contradictions.append(Check(scenario.name, case, ok, reason))

    def measure_staleness(self, scenario: Scenario) -> None:
        for spec in scenario.stale:
            owner = self.owner(scenario, spec["subject"])
            stale_id = self.memory_id(scenario, spec["subject"], spec["label"])
            if stale_id is None:
                self.obs.staleness.append(Check(scenario.name, spec["label"], False, "the stale record was never "
                                                                                     "written"))
                continue
            response = self._retrieve(owner, spec["query"], 10, 400)
            served = [p for p in response.body.get("packets", [])] if response.status == 200 else []
            ok = response.status == 200 and all(p.get("memory_id") != stale_id for p in served)
            self.obs.staleness.append(Check(scenario.name, f"{spec['label']}: retrieve", ok,
                                            "" if ok else f"stale record {stale_id} was served "
                                                          f"(status {response.status})"))
            fact = owner.principal.get("/facts", namespace=spec["namespace"], field=spec["field"])
            # Compare ids, not text: the newer record names the stale one in its "supersedes" link.
            answered = [fact.body] if fact.status == 200 else (fact.body or {}).get("records", [])
            ok = fact.status in (200, 404, 409) and all(r.get("memory_id") != stale_id for r in answered)
            self.obs.staleness.append(Check(scenario.name, f"{spec['label']}: facts", ok,
                                            "" if ok else f"facts answered {fact.status} with the stale record"))
            active = owner.principal.get("/memories", status="active", limit=200)
            ok = active.status == 200 and all(r["memory_id"] != stale_id for r in active.body["results"])
            self.obs.staleness.append(Check(scenario.name, f"{spec['label']}: list?status=active", ok,
                                            "" if ok else "the stale record is listed as active"))

    # --- isolation ---------------------------------------------------------------------------------
    def probers(self, scenario: Scenario, subject: str) -> list[tuple[str, Principal]]:
        out = [("another subject, same tenant", self.sibling)]
        if self.realm.has_tenant_b:
            out.append(("same subject id, another tenant",
                        self.realm.principal("b", self.external_id(scenario, subject))))
        return out

    def probe_isolation(self) -> None:
        self.sibling = self.realm.principal("a", f"{self.realm.run_id}-probe")
        if not self.realm.has_tenant_b:
            self.obs.notes.append("isolation: no second tenant key; cross-tenant probes skipped")
        for (scenario_name, subject), owner in self.owners.items():
            scenario = next(s for s in self.suite.scenarios if s.name == scenario_name)
            ids = [r["memory_id"] for r in owner.memories.values()]
            texts = [r["text"] for r in owner.memories.values() if len(r.get("text", "")) >= 8]
            for who, prober in self.probers(scenario, subject):
                self._probe(scenario_name, who, prober, owner, ids, texts)

    def _probe(self, scenario: str, who: str, prober: Principal, owner: Owner, ids: list[str],
               texts: list[str]) -> None:
        def record(case: str, ok: bool, reason: str) -> None:
            self.obs.isolation.append(Check(scenario, f"{who}: {case}", ok, "" if ok else reason))

        markers = ids + texts + owner.retrievals + owner.threads
        listed = prober.get("/memories", limit=200)
        leaks = contains_any(listed.body, markers)
        record("list", not leaks, f"GET /memories showed {leaks[:3]}")
        exported = prober.get("/export")
        leaks = contains_any(exported.body, markers)
        record("export", not leaks, f"GET /export showed {leaks[:3]}")
        threads = prober.get("/threads")
        leaks = contains_any(threads.body, owner.threads)
        record("threads list", not leaks, f"GET /threads showed {leaks[:3]}")
        for payload in owner.memories.values():
            memory_id = payload["memory_id"]
            got = prober.get(f"/memories/{memory_id}")
            record(f"get {memory_id}", got.status == 404, f"GET /memories/{{id}} answered {got.status}")
            history = prober.get(f"/memories/{memory_id}/history")
            record(f"history {memory_id}", history.status == 404, f"history answered {history.status}")
            ns = "/".join(payload["namespace"])
            fact = prober.get("/facts", namespace=ns, field=payload["fact"]["field"])
            leaks = contains_any(fact.body, [memory_id, payload["text"]])
            record(f"facts {ns}.{payload['fact']['field']}", not leaks, f"facts answered {fact.status} with {leaks}")
            found = prober.post("/retrieve", {"query": payload["text"], "limit": 10})
            leaks = contains_any(found.body, [memory_id, payload["text"]])
            record(f"retrieve '{payload['text'][:40]}'", not leaks, f"retrieve served {leaks}")
        for retrieval_id in owner.retrievals:
            log = prober.get(f"/retrievals/{retrieval_id}")
            record(f"retrieval log {retrieval_id}", log.status == 404, f"answered {log.status}")
        for thread_id in owner.threads:
            for suffix in ("", "/events", "/summaries", "/summary"):
                got = prober.get(f"/threads/{thread_id}{suffix}")
                record(f"thread{suffix or ''} {thread_id}", got.status == 404, f"answered {got.status}")

    # --- deletion ----------------------------------------------------------------------------------
    def wait_deletion(self, principal: Principal, deletion_id: str) -> str:
        deadline = time.monotonic() + DELETION_TIMEOUT_S
        status = "unknown"
        while time.monotonic() < deadline:
            response = principal.get(f"/deletions/{deletion_id}")
            status = response.body.get("status", f"http {response.status}") if isinstance(response.body, dict) \
                else f"http {response.status}"
            if status in ("completed", "failed"):
                return status
            time.sleep(0.25)
        return status

    def measure_deletions(self, scenario: Scenario) -> None:
        for spec in scenario.deletions:
            owner = self.owner(scenario, spec["subject"])
            if spec.get("erase"):
                response = owner.principal.delete("/subject")
                target = "subject erasure"
                memory_ids = [r["memory_id"] for r in owner.memories.values()]
            else:
                record = owner.memories[spec["label"]]
                memory_ids = [record["memory_id"]]
                response = owner.principal.delete(f"/memories/{record['memory_id']}")
                target = f"delete {spec['label']}"
            markers = list(spec.get("markers", []))
            if response.status != 202:
                self.obs.deletion.append(Check(scenario.name, target, False, f"DELETE answered {response.status}"))
                continue
            status = self.wait_deletion(owner.principal, response.body["deletion_id"])
            self.obs.deletion.append(Check(scenario.name, f"{target}: job", status == "completed",
                                           f"job ended {status}"))
            if spec.get("erase"):
                owner.erased = True
                # The erased subject's token no longer resolves; a fresh token for the same external
                # id (a new, empty subject) must not see anything of the old one either.
                owner.principal = self.realm.principal("a", owner.principal.subject_external_id)
            self.check_surfaces(scenario.name, target, owner, memory_ids, markers, spec.get("queries", []))

    def check_surfaces(self, scenario: str, target: str, owner: Owner, memory_ids: list[str], markers: list[str],
                       queries: list[str]) -> None:
        def record(surface: str, payload: Any, extra: list[str] | None = None) -> None:
            leaks = contains_any(payload, markers + (extra or []))
            self.obs.deletion.append(Check(scenario, f"{target}: {surface}", not leaks,
                                           f"still shows {leaks[:3]}" if leaks else ""))

        principal = owner.principal
        if self.realm.in_process:
            hits = [f"{m}: {col}" for m in markers for col in new_hits(m, self.baseline.get(m, {}))]
            self.obs.deletion.append(Check(scenario, f"{target}: database (every text column)", not hits,
                                           f"still stored in {hits[:4]}" if hits else ""))
        record("list (all statuses)", principal.get("/memories", limit=200).body)
        record("export", principal.get("/export").body)
        for memory_id in memory_ids:
            got = principal.get(f"/memories/{memory_id}")
            record(f"get {memory_id}", got.body)
            record(f"history {memory_id}", principal.get(f"/memories/{memory_id}/history").body)
        for payload in owner.memories.values():
            if payload["memory_id"] in memory_ids:
                fact = principal.get("/facts", namespace="/".join(payload["namespace"]),
                                     field=payload["fact"]["field"])
                record(f"facts {payload['fact']['field']}", fact.body)
        for retrieval_id in owner.retrievals:
            record(f"retrieval log {retrieval_id}", principal.get(f"/retrievals/{retrieval_id}").body)
        for thread_id in owner.threads:
            for suffix in ("/events", "/summaries"):
                record(f"thread{suffix} {thread_id}", principal.get(f"/threads/{thread_id}{suffix}").body)
        for query in queries:
            found = principal.post("/retrieve", {"query": query, "limit": 10,
                                                 "include": ["memory", "summaries"]})
            record(f"retrieve '{query}'", found.body.get("packets") if isinstance(found.body, dict) else found.body)
