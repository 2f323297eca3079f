"""The memory classes every new tenant starts with (``create_tenant``). Replace with ``load_policy``.

| class               | prefix                   | agents may | notes                                   |
|---------------------|--------------------------|------------|-----------------------------------------|
| user_profile        | user                     | write      | what the user says about themselves     |
| travel_preferences  | user/travel_preferences  | write      | 2-year retention                        |
| user_inferred       | user/inferred            | propose    | model guesses; retrievable as candidates|
| user_health         | user/health              | propose    | sensitive, encrypted, not embedded      |
| org                 | org                      | write      | org records; may cross subject lines    |
| project             | project                  | write      |                                         |
| episodes            | episodes                 | write      | episodic notes, 90-day TTL              |
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

DEFAULT_CLASSES: list[dict[str, Any]] = [
    {
        "name": "user_profile", "namespace_prefix": "user", "purpose": "Facts the user states about themselves.",
        "allowed_readers": ["owner", "agent", "reviewer"], "model_permission": "write",
        "sensitivity": "personal", "max_retention": timedelta(days=730),
    },
    {
        "name": "travel_preferences", "namespace_prefix": "user/travel_preferences",
        "purpose": "Seat, meal and airline preferences for booking.",
        "allowed_readers": ["owner", "agent", "reviewer"], "model_permission": "write",
        "sensitivity": "personal", "max_retention": timedelta(days=730),
    },
    {
        "name": "user_inferred", "namespace_prefix": "user/inferred",
        "purpose": "What the model infers about the user; never a fact without review.",
        "allowed_readers": ["owner", "agent", "reviewer"], "model_permission": "propose",
        "sensitivity": "personal", "candidates_retrievable": True, "default_ttl": timedelta(days=180),
    },
    {
        "name": "user_health", "namespace_prefix": "user/health",
        "purpose": "Health information the user chose to share (accessibility needs, allergies).",
        "allowed_readers": ["owner", "agent"], "model_permission": "propose",
        "sensitivity": "sensitive", "encryption_required": True, "embed": False,
        "max_retention": timedelta(days=365),
    },
    {
        "name": "org", "namespace_prefix": "org", "purpose": "Organisation records and policies.",
        "allowed_readers": ["owner", "agent", "reviewer"], "model_permission": "write",
        "sensitivity": "internal", "may_cross_boundaries": True,
    },
    {
        "name": "project", "namespace_prefix": "project", "purpose": "Project facts and decisions.",
        "allowed_readers": ["owner", "agent", "reviewer"], "model_permission": "write",
        "sensitivity": "internal",
    },
    {
        "name": "episodes", "namespace_prefix": "episodes", "purpose": "What happened in past sessions.",
        "allowed_readers": ["owner", "agent", "reviewer"], "model_permission": "write",
        "sensitivity": "personal", "default_ttl": timedelta(days=90), "max_retention": timedelta(days=365),
    },
]
