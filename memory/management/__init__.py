"""Helpers every area's management commands share: the tenant named on the command line, a progress bar."""

from __future__ import annotations

from django.core.management.base import CommandError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from memory.models import Tenant


def tenant_by_slug(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise CommandError(f"No tenant '{slug}'. Create it with: manage.py create_tenant {slug}")
    return tenant


def progress_bar(*, disable: bool = False) -> Progress:
    """What a long command shows: the step, a bar, done of total, and the time left."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    disable=disable)
