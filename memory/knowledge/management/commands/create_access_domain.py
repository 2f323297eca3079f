"""Create a knowledge access domain and say who may read it.

Readers: --subjects S1,S2 (subject external ids; created as user subjects when new), --kinds
project,agent (every subject of those kinds), or --all-subjects (every subject of the tenant).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.knowledge.services import access_domain_create
from memory.management import tenant_by_slug


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--name", required=True, help="Domain name: lowercase letters, digits, _ - .")
        parser.add_argument("--description", default="")
        readers = parser.add_mutually_exclusive_group()
        readers.add_argument("--subjects", default="", help="Comma-separated subject external ids")
        readers.add_argument("--all-subjects", action="store_true", help="Every subject of the tenant")
        parser.add_argument("--kinds", default="", help="Comma-separated subject kinds: user,project,agent,org")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        subjects, kinds = _csv(options["subjects"]), _csv(options["kinds"])
        if not (subjects or kinds or options["all_subjects"]):
            raise CommandError("Say who may read the domain: --subjects, --kinds or --all-subjects.")
        try:
            domain = access_domain_create(tenant=tenant, name=options["name"], description=options["description"],
                                          subject_external_ids=subjects, reader_kinds=kinds,
                                          all_subjects=options["all_subjects"], actor="cli")
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        who = "all subjects" if domain.all_subjects else ", ".join(
            [f"{len(subjects)} subject(s)"] + ([f"kinds {','.join(domain.reader_kinds)}"] if kinds else []))
        self.stdout.write(f"created access domain {domain.name} in tenant {tenant.slug}, readable by {who}")
