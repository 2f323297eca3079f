from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    """``manage.py evaluate``: no tables of its own (it plays scenarios against fresh tenants)."""

    name = "memory.evaluation"
    label = "evaluation"
