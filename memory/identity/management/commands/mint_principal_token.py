"""Mint a principal token for a subject (creates a user subject if the tenant has none with that id).

The token is printed alone on the last line.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.services import principal_token_mint
from memory.management import tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--subject", required=True)
        parser.add_argument("--ttl", type=int, default=None, help="Lifetime in seconds")
        parser.add_argument("--namespaces", default="", help="Comma-separated namespace grants")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        namespaces = [n.strip() for n in options["namespaces"].split(",") if n.strip()] or None
        try:
            token, subject, expires_at = principal_token_mint(
                tenant=tenant, subject_external_id=options["subject"], ttl=options["ttl"],
                namespaces=namespaces, actor="cli")
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"principal token for {subject.external_id} in {tenant.slug}, expires {expires_at}")
        self.stdout.write(token)
