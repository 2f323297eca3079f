from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Local: registration at import, once the app registry is ready (the modules import models):
        # include: ["procedures"] for retrieval, and the evaluation's procedure steps.
        from procedures import evaluation_steps, retrieval_provider  # noqa: F401
