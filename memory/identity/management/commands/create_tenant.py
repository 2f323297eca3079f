"""Create a tenant with the default memory classes (memory/policy/defaults.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.services import tenant_create


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="Tenant slug, e.g. acme")
        parser.add_argument("--display-name", default="")
        parser.add_argument("--no-default-classes", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant = tenant_create(slug=options["name"], name=options["display_name"],
                                   default_classes=not options["no_default_classes"], actor="cli")
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"created tenant {tenant.slug} with {tenant.memory_classes.count()} memory classes")
