"""Create an agent key. The key is printed once, alone on the last line; only its hash is stored."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.services import agent_key_create
from memory.management import tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--scopes", default="read,write,propose",
                            help="Comma-separated: read, write, propose, mint (default read,write,propose)")
        parser.add_argument("--namespaces", default="", help="Comma-separated namespace prefixes, e.g. user,org")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        scopes = [s.strip() for s in options["scopes"].split(",") if s.strip()]
        namespaces = [n.strip() for n in options["namespaces"].split(",") if n.strip()] or None
        try:
            key, raw = agent_key_create(tenant=tenant, name=options["name"], permissions=scopes,
                                        namespaces=namespaces, actor="cli")
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"agent key '{key.name}' for tenant {tenant.slug}, scopes {','.join(key.permissions)}")
        self.stdout.write(raw)
