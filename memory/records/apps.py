from django.apps import AppConfig


class RecordsConfig(AppConfig):
    """Long-term memory records: the write gate, reads, presenters, tasks and commands.

    The tables are the memory app's (memory/models.py): records share one migration history with the
    identities, classes, events and candidates they reference."""

    name = "memory.records"
    label = "records"
