from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import request_finished
        from django.db.backends.signals import connection_created
        from django_q.signals import post_execute_in_worker, post_spawn, pre_enqueue, pre_execute

        from memory import tracing  # local: in ready(), once the app registry is loaded
        from memory.db.statements import use_generic_plans  # local: in ready(), once the app registry is loaded
        from memory.workqueues import on_worker_spawn  # local: in ready(), once the app registry is loaded

        # Each worker process sets its model threads (and warms the model up) before its first task.
        post_spawn.connect(on_worker_spawn, dispatch_uid="engram.worker_spawn")
        # A request's id travels with the tasks it queues and is on the worker's log lines while each runs
        # (django-q2 builds the task package inside async_task: its hooks are the only way in).
        pre_enqueue.connect(tracing.on_pre_enqueue, dispatch_uid="engram.request_id_enqueue")
        pre_execute.connect(tracing.on_pre_execute, dispatch_uid="engram.request_id_execute")
        post_execute_in_worker.connect(tracing.on_post_execute, dispatch_uid="engram.request_id_executed")
        # Django logs an error response after the middleware returned: the id is cleared when it is sent.
        request_finished.connect(tracing.clear_request_id, dispatch_uid="engram.request_id_clear")
        connection_created.connect(use_generic_plans, dispatch_uid="engram.generic_plans")
