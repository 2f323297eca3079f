"""Normalisation used for dedupe and content hashes: case, whitespace and JSON key order don't matter."""

from __future__ import annotations

import hashlib
import json
import unicodedata


def normalise_text(text: str) -> str:
    # Runs on every write's content hash and on every retrieve's candidates: most text is already in NFKC, which
    # is_normalized tells without building a copy, and str.split() collapses the same Unicode whitespace as ``\s+``.
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split()).casefold()


def normalise_value(value: object) -> str:
    if isinstance(value, str):
        return normalise_text(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fact_hash(field: str, value: object) -> str:
    return hashlib.sha256(f"{field}\x00{normalise_value(value)}".encode()).hexdigest()


def payload_hash(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
