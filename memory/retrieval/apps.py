from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "memory.retrieval"
    label = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"
