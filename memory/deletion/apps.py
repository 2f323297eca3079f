from django.apps import AppConfig


class DeletionConfig(AppConfig):
    name = "memory.deletion"
    label = "deletion"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the long-term memory's purge surfaces and read checks (memory/deletion/registry.py).
        # Local: a module that registers imports models, which exist only once the app registry is loaded.
        from memory.deletion import core_surfaces  # noqa: F401
