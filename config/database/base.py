"""Django's PostgreSQL backend, told that a distributed table's primary key is (id, tenant_id).

PostgreSQL lets a GROUP BY name only a table's primary key when every primary-key column is in it, and Django,
which knows ``id`` as the key, groups an aggregate over a model by ``id`` alone. The tables distributed by
tenant (memory/sharding.py) have ``PRIMARY KEY (id, tenant_id)`` in the database
(memory/migrations/0009_composite_keys.py), so for them Django groups by every selected column instead.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, features

from memory.sharding import DISTRIBUTED

_DISTRIBUTED = frozenset(DISTRIBUTED)


class DatabaseFeatures(features.DatabaseFeatures):
    def allows_group_by_selected_pks_on_model(self, model: Any) -> bool:
        return super().allows_group_by_selected_pks_on_model(model) and model._meta.db_table not in _DISTRIBUTED


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures
