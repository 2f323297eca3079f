"""Create (or update the password of) a UI login; --reviewer grants the tenant's review permission,
--subject links the person to their own memories (/me/)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.identity.services import user_create
from memory.management import tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--username", required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--reviewer", action="store_true")
        parser.add_argument("--subject", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        user = user_create(tenant=tenant, username=options["username"], password=options["password"],
                           reviewer=options["reviewer"], subject_external_id=options["subject"], actor="cli")
        roles = (["reviewer"] if options["reviewer"] else []) + (
            [f"subject {options['subject']}"] if options["subject"] else [])
        self.stdout.write(f"user {user.username} in {tenant.slug}: {', '.join(roles) or 'no roles'}")
