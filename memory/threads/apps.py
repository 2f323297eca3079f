from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    name = "memory.threads"
    label = "threads"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registration by import: deletion and retrieval find this area's surfaces and provider.
        # Local: a module that registers imports models, which exist only once the app registry is loaded.
        from memory.threads import deletion_surfaces, retrieval_provider  # noqa: F401
