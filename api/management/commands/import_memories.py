"""Import memories from a JSON Lines file: one batch item per line, each with its ``subject_id``.

Each line is what POST /api/v1/memories/batch takes as an item (an explicit statement, or an
outcome when it has a ``reference`` or an outcome ``source.type``). Lines are written in batches
of up to 500 per subject through the same service as the API, so every line is validated,
policy-checked and idempotent (re-running the import replays, it does not duplicate). Embeddings
are queued for the worker, or computed here with ``--embed``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.record_input import BatchItemParser
from memory.errors import EngramError
from memory.identity.services import subject_get_or_create
from memory.management import progress_bar, tenant_by_slug
from memory.models import MemoryRecord, Tenant
from memory.records.services import MAX_BATCH, RecordInput, memory_write_batch
from memory.retrieval.embedding import embed_record_ids
from memory.scope import WRITE, Scope


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="A .jsonl file")
        parser.add_argument("--tenant", required=True, help="Tenant slug")
        parser.add_argument("--embed", action="store_true", help="Compute embeddings now instead of by the worker")
        parser.add_argument("--batch-size", type=int, default=MAX_BATCH)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        path = Path(options["file"])
        if not path.exists():
            raise CommandError(f"No file {path}.")
        lines = path.read_text().splitlines()
        size = min(max(1, options["batch_size"]), MAX_BATCH)
        counts = {"created": 0, "existing": 0, "error": 0}
        errors: list[str] = []
        written: list[str] = []
        chunk: list[tuple[int, dict[str, Any]]] = []
        subject_id: str | None = None
        with progress_bar() as progress:
            task = progress.add_task("importing", total=len(lines))

            def flush() -> None:
                if chunk and subject_id is not None:
                    start = len(written)
                    self._write(tenant, subject_id, chunk, counts, errors, written)
                    if options["embed"]:
                        embed_record_ids(written[start:])
                    progress.advance(task, len(chunk))
                chunk.clear()

            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    progress.advance(task, 1)
                    continue
                try:
                    item = json.loads(line)
                    if not isinstance(item, dict) or not isinstance(item.get("subject_id"), str):
                        raise ValueError("each line is a JSON object with a subject_id")
                except ValueError as exc:
                    counts["error"] += 1
                    errors.append(f"line {number}: {exc}")
                    progress.advance(task, 1)
                    continue
                if item["subject_id"] != subject_id or len(chunk) >= size:
                    flush()
                    subject_id = item["subject_id"]
                chunk.append((number, item))
            flush()
        pending = MemoryRecord.objects.filter(tenant=tenant, embedding__isnull=True, memory_class__embed=True,
                                              status="active").count()
        self.stdout.write(f"created {counts['created']}, existing {counts['existing']}, errors {counts['error']}; "
                          f"embeddings pending: {pending}")
        for message in errors[:20]:
            self.stdout.write(f"  {message}")

    def _write(self, tenant: Tenant, subject_id: str, chunk: list[tuple[int, dict[str, Any]]],
               counts: dict[str, int], errors: list[str], written: list[str]) -> None:
        subject = subject_get_or_create(tenant=tenant, external_id=subject_id)
        scope = Scope.for_system(actor="import", tenant_id=tenant.pk, subject_id=subject.pk,
                                 subject_external_id=subject.external_id, permissions=(WRITE,))
        parser = BatchItemParser(scope)
        parsed = [(n, parser.parse(item)) for n, item in chunk]
        for n, p in parsed:
            if isinstance(p, EngramError):
                counts["error"] += 1
                errors.append(f"line {n}: {p.code}: {p.detail}")
        valid = [(n, p) for n, p in parsed if isinstance(p, RecordInput)]
        for (n, _), result in zip(valid, memory_write_batch(scope=scope, items=[p for _, p in valid]), strict=True):
            counts[result.status] += 1
            if result.error is not None:
                errors.append(f"line {n}: {result.error.code}: {result.error.detail}")
            elif result.record is not None:
                written.append(result.record.pk)
