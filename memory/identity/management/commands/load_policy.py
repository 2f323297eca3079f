"""Replace a tenant's memory classes with the list in a JSON or YAML file.

Each item: name, namespace_prefix (e.g. "user/travel_preferences"), purpose, allowed_readers,
model_permission (write/propose/read/none), sensitivity, encryption_required, embed,
default_ttl and max_retention (days), may_cross_boundaries, candidates_retrievable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.identity.services import memory_classes_load
from memory.management import tenant_by_slug


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        path = Path(options["file"])
        try:
            text = path.read_text()
            classes = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise CommandError(f"Cannot read {path}: {exc}") from exc
        if not isinstance(classes, list) or not all(isinstance(c, dict) for c in classes):
            raise CommandError("The file must hold a list of memory classes.")
        try:
            count = memory_classes_load(tenant=tenant, classes=classes, actor="cli")
        except EngramError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"loaded {count} memory classes for {tenant.slug}")
