from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from memory.workqueues import on_worker_spawn  # local: in ready(), once the app registry is loaded

        # Each worker process sets its model threads (and warms the model up) before its first task.
        post_spawn.connect(on_worker_spawn, dispatch_uid="engram.worker_spawn")
