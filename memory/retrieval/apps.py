from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "memory.retrieval"
    label = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the retrieval logs as a deletion surface (memory/deletion/registry.py).
        # Local: a module that registers imports models, which exist only once the app registry is loaded.
        from memory.retrieval import deletion_surfaces  # noqa: F401
