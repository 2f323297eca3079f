"""Replace an agent key with a new one of the same scopes and namespaces; the new key is printed once, alone on
the last line. The old key (and the principal tokens it minted) stops working now, or after --grace seconds
so that clients can switch over. The key is named by its id, its prefix (egk_AbCdEfGh) or the whole key (matched
by its SHA-256 hash, the only form stored)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.services import agent_key_find, agent_key_rotate
from memory.management import tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="The key's id, its prefix (egk_AbCdEfGh), or the whole key (matched by its "
                                        "SHA-256 hash)")
        parser.add_argument("--tenant", help="Tenant slug (narrows a prefix lookup)")
        parser.add_argument("--grace", type=int, default=0, help="Seconds the old key keeps working (default 0)")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"]) if options["tenant"] else None
        if options["grace"] < 0:
            raise CommandError("--grace is a number of seconds, 0 or more.")
        try:
            old = agent_key_find(options["key"], tenant=tenant)
            new, raw = agent_key_rotate(key=old, actor="cli", grace_seconds=options["grace"])
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        old.refresh_from_db()
        self.stdout.write(f"agent key '{old.name}' ({old.prefix}…, id {old.pk}) replaced by id {new.pk}; the old key "
                          f"stops working at {old.revoked_at:%Y-%m-%d %H:%M:%S} UTC")
        self.stdout.write(raw)
