"""Ingest files into an access domain: .txt, .md and .html (converted to plain text), with a progress bar.

Each file becomes one document; its external id is the path relative to the directory given (or
the file name), so running the command again skips unchanged files and stores a new version of
changed ones. Directories are walked recursively. Embeddings are computed here, whatever the file's
size (no worker needed). --dry-run converts, scans and chunks, and stores nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.errors import EngramError
from memory.knowledge.formats import mime_type_for
from memory.knowledge.models import AccessDomain
from memory.knowledge.services import DocumentInput, document_ingest, operator_scope, prepare_only
from memory.management import progress_bar, tenant_by_slug


def _files(paths: list[str]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [(f, f.relative_to(path).as_posix()) for f in sorted(path.rglob("*"))
                      if f.is_file() and mime_type_for(f)]
        elif path.is_file():
            if not mime_type_for(path):
                raise CommandError(f"{path}: only .txt, .md and .html files can be ingested.")
            found.append((path, path.name))
        else:
            raise CommandError(f"{path}: no such file or directory.")
    return found


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--domain", required=True, help="Access domain name")
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--dry-run", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_by_slug(options["tenant"])
        domain = AccessDomain.objects.filter(tenant=tenant, name=options["domain"]).first()
        if domain is None:
            raise CommandError(f"No access domain '{options['domain']}' in tenant {tenant.slug}; "
                               "create it with manage.py create_access_domain.")
        files = _files(options["paths"])
        scope = operator_scope(tenant)
        counts = {"created": 0, "updated": 0, "unchanged": 0, "failed": 0, "checked": 0}
        with progress_bar(disable=not self.stdout.isatty()) as progress:
            task = progress.add_task("ingesting", total=len(files))
            for path, external_id in files:
                mime_type = mime_type_for(path) or "text/plain"
                item = DocumentInput(access_domain=domain.name, external_id=external_id,
                                     title="" if mime_type == "text/html" else path.stem, fallback_title=path.stem,
                                     text=path.read_text(encoding="utf-8", errors="replace"),
                                     uri=path.resolve().as_uri(), mime_type=mime_type)
                try:
                    if options["dry_run"]:
                        prepare_only(scope=scope, item=item, domain=domain)
                        counts["checked"] += 1
                    else:
                        counts[document_ingest(scope=scope, item=item, domain=domain, embed_now=True).status] += 1
                except EngramError as exc:
                    counts["failed"] += 1
                    self.stderr.write(f"{path}: {exc.code}: {exc.detail}")
                progress.advance(task)
        summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        self.stdout.write(f"{len(files)} file(s) into {domain.name}: {summary or 'nothing to do'}")
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} file(s) were refused.")
