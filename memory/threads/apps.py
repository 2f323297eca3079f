from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    name = "memory.threads"
    label = "threads"
    default_auto_field = "django.db.models.BigAutoField"
