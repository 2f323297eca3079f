"""Revoke an agent key, by id, by the prefix shown when it was created (egk_AbCdEfGh), or by the whole key
(for whoever holds it: it is matched by its SHA-256 hash, the only form stored).

Effective on the next request on every node: neither the key nor any principal token it minted is accepted.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.services import agent_key_find, agent_key_revoke
from memory.management import tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="The key's id, its prefix (egk_AbCdEfGh), or the whole key (matched by its "
                                        "SHA-256 hash)")
        parser.add_argument("--tenant", help="Tenant slug (narrows a prefix lookup)")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"]) if options["tenant"] else None
        try:
            key = agent_key_revoke(key=agent_key_find(options["key"], tenant=tenant), actor="cli")
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"agent key '{key.name}' ({key.prefix}…, id {key.pk}) of tenant {key.tenant.slug} "
                          f"revoked at {key.revoked_at:%Y-%m-%d %H:%M:%S} UTC, with the principal tokens it minted")
