"""Tombstones: keyed hashes that let a delayed job recognise deleted content without keeping it.

The HMAC key is derived from SECRET_KEY, so the hashes cannot be brute-forced from the table alone.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Now

from memory.models import Tombstone
from memory.normalise import normalise_value


def keyed_hash(value: str) -> str:
    key = hashlib.sha256(("engram-tombstone:" + settings.SECRET_KEY).encode()).digest()
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


def subject_hash(tenant_id: int, subject_external_id: str) -> str:
    return keyed_hash(f"subject:{tenant_id}:{subject_external_id}")


def content_hash_for(namespace: str, field: str, value: object) -> str:
    return keyed_hash(f"content:{namespace}:{field}:{normalise_value(value)}")


def event_hash(event_external_id: str) -> str:
    return keyed_hash(f"event:{event_external_id}")


def is_tombstoned(*, tenant_id: int, subject_external_id: str, namespace: str, field: str, value: object,
                  event_ids: Iterable[str] = ()) -> bool:
    """True when deleted content (same subject, key and value) or a deleted source event comes back.

    ``value=None`` checks the events only: a person may state a deleted fact again in a new event.
    """
    live = Tombstone.objects.filter(tenant_id=tenant_id, subject_hash=subject_hash(tenant_id, subject_external_id),
                                    expires_at__gt=Now())
    by_event = Q(pk__in=[])
    for external_id in event_ids:
        by_event |= Q(event_hashes__contains=[event_hash(external_id)])
    if value is not None:
        by_event |= Q(content_hash=content_hash_for(namespace, field, value))
    return live.filter(by_event).exists()
