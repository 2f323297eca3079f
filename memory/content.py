"""Sealing of record content for classes that require encryption at rest.

Every write stores ``seal(...)`` output and every read surface shows ``unseal(...)`` output, so the
encryption policy lives in one place. (Until the privacy issue lands, both are the identity.)
"""

from __future__ import annotations

from typing import Any

from memory.models import MemoryClass, MemoryRecord


def seal(memory_class: MemoryClass, fact: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    """What to store for ``fact`` and ``text`` under ``memory_class``."""
    return fact, text


def unseal(record: MemoryRecord) -> tuple[dict[str, Any], str]:
    """The readable fact and text of a stored record."""
    return record.fact, record.text
