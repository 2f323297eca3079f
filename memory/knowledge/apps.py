from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "memory.knowledge"
    label = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registration at import: the retrieval pipeline and the deletion job find us by name.
        # Local: a module that registers imports models, which exist only once the app registry is loaded.
        from memory.knowledge import deletion_surfaces, retrieval_provider  # noqa: F401
