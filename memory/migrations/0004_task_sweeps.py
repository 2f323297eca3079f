"""Two schedules that make queued work self-healing: a task that could not be queued (the database was
restarting at the commit) or was given up (the embedding model was down) is picked up again.

- engram.sweep_deletions, every minute on the urgent queue: re-queues deletion jobs still pending or
  running a minute after their last progress (running a job twice is safe: it resumes, or finds it busy).
- engram.embed_pending, every five minutes on the bulk queue: embeds active records still without one.
"""

from django.db import migrations

SCHEDULES = {
    "engram.sweep_deletions": {"func": "memory.deletion.tasks.sweep_deletions", "schedule_type": "I", "minutes": 1,
                               "repeats": -1, "cluster": "urgent"},
    "engram.embed_pending": {"func": "memory.records.tasks.embed_pending", "schedule_type": "I", "minutes": 5,
                             "repeats": -1, "cluster": "bulk"},
}


def create_schedules(apps, schema_editor):  # type: ignore[no-untyped-def]
    Schedule = apps.get_model("django_q", "Schedule")
    for name, spec in SCHEDULES.items():
        Schedule.objects.update_or_create(name=name, defaults=spec)


def remove_schedules(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("django_q", "Schedule").objects.filter(name__in=list(SCHEDULES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0003_cache_table"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
