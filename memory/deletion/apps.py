from django.apps import AppConfig


class DeletionConfig(AppConfig):
    name = "memory.deletion"
    label = "deletion"
    default_auto_field = "django.db.models.BigAutoField"
