"""Publish a procedure version from a file (bootstrap), in the name of a reviewer of the tenant.

This is the operator's way to seed procedures before any agent can propose changes; it goes through
the same service as an approval (``procedure_publish``), so it is refused for anyone who is not a
reviewer of the tenant, marks open proposals stale, and writes a ``procedure.publish`` audit row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.access import reviewer_of
from memory.management import tenant_by_slug
from procedures.services import procedure_publish


class Command(BaseCommand):
    help = "Publish the next version of a procedure from a file, approved by a reviewer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="Tenant slug.")
        parser.add_argument("--name", required=True, help="Procedure name (created if new).")
        parser.add_argument("--file", required=True, help="UTF-8 text file with the procedure body ('-' = stdin).")
        parser.add_argument("--reviewer", required=True, help="Username of a reviewer of the tenant.")
        parser.add_argument("--scope", choices=["org", "project"], default="org",
                            help="For a new procedure: org (every subject) or project (members only).")
        parser.add_argument("--member", action="append", default=[],
                            help="Subject external id allowed to read a project procedure (repeatable).")
        parser.add_argument("--summary", default="", help="Change summary for the history.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        reviewer = get_user_model().objects.filter(username=options["reviewer"]).first()
        if reviewer is None:
            raise CommandError(f"No user '{options['reviewer']}'.")
        try:
            body = (self.stdin_text() if options["file"] == "-" else
                    Path(options["file"]).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Cannot read {options['file']}: {exc}") from exc
        try:
            version = procedure_publish(tenant=tenant, name=options["name"], body=body, reviewer=reviewer_of(reviewer),
                                        change_summary=options["summary"], scope=options["scope"],
                                        members=options["member"])
        except EngramError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from exc
        self.stdout.write(f"published {tenant.slug}/{options['name']} version {version.number} "
                          f"(approved by {reviewer.get_username()})")

    def stdin_text(self) -> str:
        import sys

        return sys.stdin.read()
