from django.apps import AppConfig


class IdentityConfig(AppConfig):
    """Tenants, subjects, agent keys, principal tokens, UI users and memory-class policy loading.

    The tables are the memory app's (memory/models.py)."""

    name = "memory.identity"
    label = "identity"
