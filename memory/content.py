"""Sealing of record content for classes that require encryption at rest (Fernet, key rotation by MultiFernet).

Every write stores ``seal(...)`` output and every read surface shows ``unseal(...)`` output, so the
encryption policy lives in one place. A sealed record stores
``fact = {"field": <field>, "sealed": "<fernet token>"}`` (the field name stays readable: precedence
indexes it, and it is schema, not content) and ``text = "fernet:<token>"``.

Keys: ``settings.ENGRAM_FERNET_KEYS`` (env ``ENGRAM_FERNET_KEYS``, comma-separated, newest first).
The newest key encrypts; every listed key decrypts, so rotation is: prepend a new key, deploy, re-seal
stored rows with ``rotate_parts`` (docs/privacy.md has the one-liner), then drop the old key. With no key
set (development only) a key is derived from SECRET_KEY, so a fresh clone works; docs/privacy.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from memory.models import Candidate, MemoryClass, MemoryRecord

TEXT_PREFIX = "fernet:"
UNREADABLE = "[encrypted: key unavailable]"


def dev_key() -> bytes:
    """The development key: derived from SECRET_KEY, so it is only as secret as that key."""
    digest = hashlib.sha256(("engram-fernet:" + settings.SECRET_KEY).encode()).digest()
    return base64.urlsafe_b64encode(digest)


@lru_cache(maxsize=4)
def _fernet_for(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    raw = [k.encode() for k in keys] or [dev_key()]
    return MultiFernet([Fernet(k) for k in raw])


def fernet() -> MultiFernet:
    return _fernet_for(tuple(settings.ENGRAM_FERNET_KEYS), settings.SECRET_KEY)


def encrypt_str(value: str) -> str:
    return fernet().encrypt(value.encode()).decode()


def decrypt_str(token: str) -> str:
    return fernet().decrypt(token.encode()).decode()


def is_sealed(fact: Any, text: str) -> bool:
    return (isinstance(fact, dict) and "sealed" in fact) or text.startswith(TEXT_PREFIX)


def seal(memory_class: MemoryClass, fact: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    """What to store for ``fact`` and ``text`` under ``memory_class``."""
    if not memory_class.encryption_required:
        return fact, text
    body = {k: v for k, v in fact.items() if k != "field"}
    sealed_fact = {"field": fact.get("field"), "sealed": encrypt_str(json.dumps(body, sort_keys=True))}
    return sealed_fact, TEXT_PREFIX + encrypt_str(text)


def seal_text(memory_class: MemoryClass, text: str) -> str:
    """A free text (an event's words) as stored under ``memory_class``; ``unseal_text`` reads it back."""
    if not memory_class.encryption_required or not text or text.startswith(TEXT_PREFIX):
        return text
    return TEXT_PREFIX + encrypt_str(text)


def unseal_parts(fact: Any, text: str) -> tuple[dict[str, Any], str]:
    """The readable fact and text of stored content (sealed or not)."""
    if isinstance(fact, dict) and "sealed" in fact:
        try:
            fact = {"field": fact.get("field"), **json.loads(decrypt_str(fact["sealed"]))}
        except InvalidToken:
            fact = {"field": fact.get("field"), "value": UNREADABLE}
    if text.startswith(TEXT_PREFIX):
        try:
            text = decrypt_str(text[len(TEXT_PREFIX):])
        except InvalidToken:
            text = UNREADABLE
    return fact, text


def unseal_text(text: str) -> str:
    """The readable form of a free text stored by ``seal_text`` (sealed or not)."""
    return unseal_parts({}, text)[1]


def seal_evidence(memory_class: MemoryClass, evidence: list[Any]) -> list[Any]:
    """A candidate's evidence quotes as stored under ``memory_class`` (each quote's text sealed)."""
    return [{**e, "text": seal_text(memory_class, e["text"])} if isinstance(e, dict) and isinstance(e.get("text"), str)
            else e for e in evidence]


def unseal_evidence(evidence: Any) -> list[Any]:
    """The readable evidence quotes of stored evidence (sealed or not)."""
    return [{**e, "text": unseal_text(e["text"])} if isinstance(e, dict) and isinstance(e.get("text"), str)
            else e for e in (evidence if isinstance(evidence, list) else [])]


def seal_candidate(memory_class: MemoryClass, fact: dict[str, Any], text: str,
                   evidence: list[Any]) -> tuple[dict[str, Any], str, list[Any]]:
    """What to store for a candidate's fact, text and evidence under ``memory_class``."""
    stored_fact, stored_text = seal(memory_class, fact, text)
    return stored_fact, stored_text, seal_evidence(memory_class, evidence)


def unseal_candidate(candidate: Candidate) -> tuple[dict[str, Any], str, list[Any]]:
    """The readable fact, text and evidence of a stored candidate."""
    fact, text = unseal_parts(candidate.fact, candidate.text)
    return fact, text, unseal_evidence(candidate.evidence)


def candidate_is_sealed(candidate: Candidate) -> bool:
    return is_sealed(candidate.fact, candidate.text) or any(
        isinstance(e, dict) and str(e.get("text") or "").startswith(TEXT_PREFIX) for e in candidate.evidence or [])


def unseal(record: MemoryRecord) -> tuple[dict[str, Any], str]:
    """The readable fact and text of a stored record."""
    return unseal_parts(record.fact, record.text)


def rotate_parts(fact: Any, text: str) -> tuple[Any, str]:
    """Re-encrypt sealed content under the newest key (MultiFernet.rotate); plaintext passes through."""
    f = fernet()
    if isinstance(fact, dict) and "sealed" in fact:
        fact = {**fact, "sealed": f.rotate(fact["sealed"].encode()).decode()}
    if text.startswith(TEXT_PREFIX):
        text = TEXT_PREFIX + f.rotate(text[len(TEXT_PREFIX):].encode()).decode()
    return fact, text
