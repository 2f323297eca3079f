"""Seed the demo tenant: a reviewer, a user with a few memories, an agent key. Safe to run again.

Logins: reviewer / engram-reviewer and alice / engram-alice. The agent key is written once to
var/demo-agent-key (keys are never stored in clear in the database).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from memory.identity.services import agent_key_create, subject_get_or_create, tenant_create, user_create
from memory.models import AgentKey, Tenant
from memory.records.services import RecordInput, candidate_submit, memory_write, outcome_record
from memory.scope import ALL_PERMISSIONS, Scope

DEMO_MEMORIES = [
    ("user/travel_preferences", "preference", "seat_preference", "aisle", "Prefers aisle seats"),
    ("user/travel_preferences", "preference", "meal", "vegetarian", "Eats vegetarian meals on flights"),
    ("user/profile", "profile", "home_airport", "MUC", "Home airport is Munich (MUC)"),
    ("user/profile", "profile", "language", "de", "Prefers to be addressed in German"),
]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--key-file", default=str(settings.VAR_DIR / "demo-agent-key"),
                            help="Where to write the demo agent key when it is (re)created")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug="demo").first() or tenant_create(slug="demo", name="Demo Org", actor="seed")
        user_create(tenant=tenant, username="reviewer", password="engram-reviewer", reviewer=True, actor="seed")
        user_create(tenant=tenant, username="alice", password="engram-alice", subject_external_id="usr_alice",
                    actor="seed")
        subject = subject_get_or_create(tenant=tenant, external_id="usr_alice")
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
        candidate_submit(scope=scope, item=RecordInput(
            namespace="user/inferred", kind="preference", field="hotel_chain", value="small boutique hotels",
            text="Seems to prefer small boutique hotels", event_id="demo-evt-inferred", source_type="model_inferred",
            event_text="I loved that tiny hotel in Porto, much better than the big chains."))
        key_file = Path(options["key_file"])
        if not AgentKey.objects.filter(tenant=tenant, name="demo-agent").exists() or not key_file.exists():
            AgentKey.objects.filter(tenant=tenant, name="demo-agent").delete()
            _, raw = agent_key_create(tenant=tenant, name="demo-agent",
                                      permissions=["read", "write", "propose", "mint"], actor="seed")
            key_file.write_text(raw + "\n")
        self.stdout.write("demo tenant ready: logins reviewer/engram-reviewer and alice/engram-alice")
        self.stdout.write(f"agent key (mint scope) in {key_file}")
