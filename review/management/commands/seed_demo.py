"""Seed the demo tenant so every flow has something to show. Safe to run again: nothing is duplicated.

Alice ("Alice Martin", subject usr_alice) has a few memories, one of them an object (her last booking), and
a guess the assistant serves unconfirmed. The reviewer finds three inferred candidates waiting (one
disagreeing with what Alice said), one open conflict (two records from her organisation that disagree on
her travel policy), and one proposed change to the "refunds" procedure. The overview has a finished deletion
job and a retrieval whose log shows candidates kept and dropped.

Everything is written through the services the API and the worker use (the worker's consolidation and
deletion steps are run here in-process, so the demo needs no running worker to be complete).

Logins: reviewer / engram-reviewer and alice / engram-alice. The agent key is written once to
var/demo-agent-key (keys are never stored in clear in the database).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from memory.consolidation import consolidate
from memory.deletion.models import DeletionJob
from memory.deletion.services import deletion_run, memory_delete
from memory.identity.access import reviewer_of
from memory.identity.services import (
    agent_key_create,
    subject_display_name_set,
    subject_get_or_create,
    tenant_create,
    user_create,
)
from memory.models import AgentKey, Tenant
from memory.records.services import RecordInput, candidate_submit, memory_write, outcome_record
from memory.retrieval.models import RetrievalLog
from memory.retrieval.pipeline import RetrieveRequest, memory_retrieve
from memory.scope import ALL_PERMISSIONS, Scope
from procedures.models import ChangeProposal, Procedure
from procedures.services import procedure_publish, proposal_create

DEMO_MEMORIES = [
    ("user/travel_preferences", "preference", "seat_preference", "aisle", "Prefers aisle seats"),
    ("user/travel_preferences", "preference", "meal", "vegetarian", "Eats vegetarian meals on flights"),
    ("user/profile", "profile", "home_airport", "MUC", "Home airport is Munich (MUC)"),
    ("user/profile", "profile", "language", "de", "Prefers to be addressed in German"),
]

# Guesses the assistant made, waiting for a reviewer: (namespace, field, value, sentence, what Alice said).
DEMO_REVIEW = [
    ("user/travel_preferences", "seat_preference", "window", "Prefers window seats on night flights",
     "On the night flight I'd rather lean against the window and sleep."),
    ("user/travel_preferences", "frequent_flyer", {"programme": "Miles & More", "status": "Frequent Traveller",
                                                    "lounge_access": True},
     "Is a Miles & More Frequent Traveller with lounge access", "I'll wait in the lounge, my Frequent Traveller "
                                                                  "card still works."),
    ("user/profile", "travel_companions", ["Ben (partner)", "Mia (daughter, 7)"], "Often travels with Ben and Mia",
     "Book the same for Ben and Mia, as always."),
]

# Two records from Alice's organisation that disagree: the same authority, so a person decides.
DEMO_POLICY = [
    ("demo-evt-policy-hr", {"cabin": "economy", "max_fare_eur": 400, "approver": "team lead"},
     "Travel policy (HR system): economy up to 400 EUR, approved by the team lead"),
    ("demo-evt-policy-contract", {"cabin": "premium economy", "max_fare_eur": 900, "approver": None},
     "Travel policy (new contract): premium economy up to 900 EUR, no approval needed"),
]

REFUNDS_V1 = """Refund procedure
1. Look up the order in the billing system.
2. Refunds up to 50 EUR: refund at once and tell the customer.
3. Above 50 EUR: open a ticket for the finance team.
"""
REFUNDS_PROPOSED = REFUNDS_V1 + "4. Tell the customer the ticket number and when to expect an answer.\n"


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--key-file", default=str(settings.VAR_DIR / "demo-agent-key"),
                            help="Where to write the demo agent key when it is (re)created")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug="demo").first() or tenant_create(slug="demo", name="Demo Org", actor="seed")
        reviewer = user_create(tenant=tenant, username="reviewer", password="engram-reviewer", reviewer=True,
                               actor="seed")
        user_create(tenant=tenant, username="alice", password="engram-alice", subject_external_id="usr_alice",
                    actor="seed")
        subject = subject_get_or_create(tenant=tenant, external_id="usr_alice")
        subject_display_name_set(subject=subject, display_name="Alice Martin", actor="seed")
        scope = Scope.for_system(actor="seed", tenant_id=tenant.pk, subject_id=subject.pk,
                                 subject_external_id=subject.external_id, permissions=ALL_PERMISSIONS)
        for i, (namespace, kind, field, value, text) in enumerate(DEMO_MEMORIES):
            memory_write(scope=scope, item=RecordInput(
                namespace=namespace, kind=kind, field=field, value=value, text=text, event_id=f"demo-evt-{i}",
                event_text=f"User said: {text.lower()}"))
        outcome_record(scope=scope, item=RecordInput(
            namespace="user/bookings", kind="booking", field="last_booking", value={"order_id": "ORD-2026-0042",
            "route": "MUC-LIS"}, text="Booked MUC-LIS, order ORD-2026-0042", event_id="demo-evt-booking",
            source_type="verified_outcome"))
        # Served unconfirmed (its class serves candidates): Alice confirms or denies it on /me/.
        guess = candidate_submit(scope=scope, item=RecordInput(
            namespace="user/inferred", kind="preference", field="hotel_chain", value="small boutique hotels",
            text="Seems to prefer small boutique hotels", event_id="demo-evt-inferred", source_type="model_inferred",
            event_text="I loved that tiny hotel in Porto, much better than the big chains."))
        consolidate(guess.candidate.pk)
        self._review_flows(scope)
        self._procedure(tenant, reviewer, scope)
        self._deletion(scope)
        self._retrieval(scope)
        key_file = Path(options["key_file"])
        if not AgentKey.objects.filter(tenant=tenant, name="demo-agent").exists() or not key_file.exists():
            AgentKey.objects.filter(tenant=tenant, name="demo-agent").delete()
            _, raw = agent_key_create(tenant=tenant, name="demo-agent",
                                      permissions=["read", "write", "propose", "mint"], actor="seed")
            key_file.write_text(raw + "\n")
        self.stdout.write("demo tenant ready: logins reviewer/engram-reviewer and alice/engram-alice")
        self.stdout.write(f"agent key (mint scope) in {key_file}")

    def _review_flows(self, scope: Scope) -> None:
        """Three candidates for the reviewer and one conflict. Candidates are idempotent by event id, and
        consolidating a decided candidate changes nothing, so a second run finds them as they are."""
        for i, (namespace, field, value, text, said) in enumerate(DEMO_REVIEW):
            result = candidate_submit(scope=scope, item=RecordInput(
                namespace=namespace, kind="preference", field=field, value=value, text=text,
                event_id=f"demo-evt-review-{i}", source_type="model_inferred", event_text=said))
            consolidate(result.candidate.pk)
        for event_id, value, text in DEMO_POLICY:
            outcome_record(scope=scope, item=RecordInput(
                namespace="org/travel_policy", kind="policy", field="travel_class", value=value, text=text,
                event_id=event_id, source_type="org_record"))

    def _procedure(self, tenant: Tenant, reviewer: Any, scope: Scope) -> None:
        procedure = Procedure.objects.filter(tenant=tenant, name="refunds").first()
        if procedure is None:
            procedure = procedure_publish(tenant=tenant, name="refunds", body=REFUNDS_V1,
                                          reviewer=reviewer_of(reviewer), change_summary="First version").procedure
        if not ChangeProposal.objects.filter(procedure=procedure).exists():
            proposal_create(procedure=procedure, body=REFUNDS_PROPOSED, scope=scope,
                            rationale="Customers asked twice this week when they would hear back.")

    def _deletion(self, scope: Scope) -> None:
        """Alice's old address, remembered and then deleted: one finished deletion job (run here, as the
        worker would). Only once: the deleted statement's event stays tombstoned."""
        if DeletionJob.objects.filter(tenant_id=scope.tenant_id).exists():
            return
        written = memory_write(scope=scope, item=RecordInput(
            namespace="user/profile", kind="profile", field="home_address", value="Old Town 5, Munich",
            text="Lives at Old Town 5, Munich", event_id="demo-evt-address"))
        job = memory_delete(scope=scope, memory_id=written.record.pk)
        deletion_run(job_id=job.pk)

    def _retrieval(self, scope: Scope) -> None:
        """One retrieval with a small limit: the inspector shows what was kept and what was dropped, and why."""
        if RetrievalLog.objects.filter(tenant_id=scope.tenant_id, subject_id=scope.subject_id).exists():
            return
        memory_retrieve(scope=scope, request=RetrieveRequest(
            query="Which seat and meal does Alice prefer on flights from Munich?", limit=2))
