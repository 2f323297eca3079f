from __future__ import annotations

from django.core.management.base import CommandError

from memory.models import Tenant


def tenant_by_slug(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise CommandError(f"No tenant '{slug}'. Create it with: manage.py create_tenant {slug}")
    return tenant
