from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from procedures import retrieval_provider  # noqa: F401  (registers include: ["procedures"])
