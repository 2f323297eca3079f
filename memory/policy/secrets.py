"""Secret detection at every write gate. A secret is refused and stored nowhere (not even the event log).

detect-secrets finds tokens, keys and keyword-assigned passwords; its entropy plugins are left out
because they flag ordinary prose ("Prefers aisle seats"). Our own checks add what it does not
cover in prose: payment card numbers (Luhn-checked), private key blocks, recovery codes,
government ID numbers and passwords stated in words ("my password is ...").
Findings name the kind of secret and where it was, never the secret itself. Encoded candidates (base64,
hex, percent-escapes) are decoded and read again (``decoded_forms``), and ``redact_secrets`` takes them out
of log lines.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, unquote_plus

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.core.scan import scan_line
from detect_secrets.settings import get_settings

from memory.errors import SecretDetected
from memory.ids import OWN_ID

_NOISY_PLUGINS = {"Base64HighEntropyString", "HexHighEntropyString"}
_PLUGIN_CLASSES: list[Any] = list(get_mapping_from_secret_type_to_class().values())
_PLUGIN_NAMES: list[str] = [cls.__name__ for cls in _PLUGIN_CLASSES]
get_settings().configure_plugins([{"name": name} for name in _PLUGIN_NAMES if name not in _NOISY_PLUGINS])


@dataclass(frozen=True)
class Finding:
    kind: str
    location: str  # a JSON-path-like location in the payload, e.g. "fact.value"


# A card number stands alone: digits inside a word, or inside a token of hex groups joined by hyphens, belong to a
# hash or an id (one random 32-digit hex id in about 600, and one UUID in about 14,000, holds a run of 13-19 digits
# that passes the Luhn check).
_CARD_CANDIDATE = re.compile(
    r"(?<![0-9A-Za-z])(?<![0-9A-Fa-f]{4}-)(?:\d[ -]?){12,18}\d(?![0-9A-Za-z]|-[0-9A-Fa-f]{4})")
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")
_RECOVERY_CODES = re.compile(
    r"\b(?:recovery|backup|2fa|mfa|one[- ]time)\s+codes?\b[^A-Za-z0-9]{0,10}(?:\w+\s+){0,3}?"
    r"(?=[A-Za-z0-9\-]*\d)[A-Za-z0-9]{4,}(?:[- ][A-Za-z0-9]{3,})?",
    re.IGNORECASE,
)
_US_SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b")
_UK_NINO = re.compile(r"\b[A-CEGHJ-PR-TW-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b")
_ID_KEYWORD = re.compile(
    r"\b(?:passport|social security|national id|national insurance|driver'?s licen[cs]e|tax id|ssn)"
    r"(?:\s+(?:number|no\.?|#))?\s*(?:is|:|=)?\s*[A-Z0-9][A-Z0-9\- ]{5,}\b",
    re.IGNORECASE,
)
_PASSWORD_IN_WORDS = re.compile(
    r"\b(?:password|passwd|passcode|passphrase|pin code|pin)\b\s*(?:is|was|:|=)\s*\S{3,}", re.IGNORECASE
)
_CREDENTIAL_ASSIGNMENT = re.compile(
    r"\b(?:api[_ -]?key|access[_ -]?token|secret[_ -]?key|auth[_ -]?token|bearer)\b\s*(?:is|:|=)?\s*"
    r"[A-Za-z0-9_\-.+/=]{12,}",
    re.IGNORECASE,
)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _own_checks(text: str) -> Iterator[str]:
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            yield "payment_card_number"
    if _PRIVATE_KEY.search(text):
        yield "private_key"
    if _RECOVERY_CODES.search(text):
        yield "recovery_code"
    if _US_SSN.search(text) or _UK_NINO.search(text) or _ID_KEYWORD.search(text):
        yield "government_id"
    if _PASSWORD_IN_WORDS.search(text):
        yield "password"
    if _CREDENTIAL_ASSIGNMENT.search(text):
        yield "access_token"


_FERNET_TOKEN = re.compile(r"gAAAAA[A-Za-z0-9_\-]{90,}={0,2}")


def is_ciphertext(text: str) -> bool:
    """A Fernet token: version byte 0x80, timestamp, IV, whole AES blocks, HMAC (57 + 16n bytes).

    Such a string is ciphertext (the OpenAI Agents SDK's EncryptedSession stores each item as one; so do
    clients that seal before sending): it cannot show a secret, but its random base64 matches token
    patterns now and then (measured: 2 in 20,000 session envelopes looked like a GitHub token or an ID
    number), so it is not scanned. A secret base64-encoded by hand is still found: ``decoded_forms``
    reads base64 runs that decode to printable text, which a Fernet token never does."""
    if not _FERNET_TOKEN.fullmatch(text):
        return False
    try:
        raw = base64.urlsafe_b64decode(text)
    except (ValueError, binascii.Error):
        return False
    return raw[0] == 0x80 and len(raw) >= 73 and (len(raw) - 57) % 16 == 0


def _plugin_prefilter() -> list[re.Pattern[str]]:
    """Every pattern without which no enabled detect-secrets plugin can report a line: the regex plugins'
    own denylists and the keyword plugin's keywords. Running detect-secrets costs ~400 us a line (25 plugin
    calls through its dependency injection); these searches cost a few, and most prose matches none."""
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.keyword import DENYLIST

    patterns = [p for cls in _PLUGIN_CLASSES if issubclass(cls, RegexBasedDetector)
                and cls.__name__ not in _NOISY_PLUGINS for p in cls().denylist]
    patterns.append(re.compile("|".join(DENYLIST), re.IGNORECASE))
    # A plugin we cannot prefilter (neither regex nor keyword based) disables the shortcut.
    known = {cls.__name__ for cls in _PLUGIN_CLASSES if issubclass(cls, RegexBasedDetector)} | {"KeywordDetector"}
    return patterns if set(_PLUGIN_NAMES) - _NOISY_PLUGINS <= known else []


_PREFILTER = _plugin_prefilter()


def _may_hold_plugin_secret(line: str) -> bool:
    return not _PREFILTER or any(pattern.search(line) for pattern in _PREFILTER)


# Encoded candidates: a run of base64 (standard or URL-safe) or of hex long enough to hold a token once
# decoded, and percent-escapes. Shorter runs are ordinary words and ids.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_PRINTABLE = re.compile(r"[\t\n\r\x20-\x7e]+")
_MAX_DECODE_DEPTH = 2  # base64 of a URL-encoded token, say; deeper nesting is not looked into


def _text_of(raw: bytes) -> str | None:
    """Decoded bytes as text when they are printable ASCII (what a token, key or password is); random
    bytes (an id, a hash, a word that happens to be base64) are not."""
    if not raw or not raw.isascii():
        return None
    text = raw.decode("ascii")
    return text if _PRINTABLE.fullmatch(text) else None


def _base64_text(run: str) -> str | None:
    run = run.rstrip("=")
    if len(run) % 4 == 1:
        return None
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded) if "-" in run or "_" in run else base64.b64decode(padded)
    except (ValueError, binascii.Error):
        return None
    return _text_of(raw)


def decoded_forms(text: str) -> list[str]:
    """What ``text`` says once decoded: its percent-escapes resolved, and each long base64 or hex run that
    decodes to printable text. The scan reads these too, so an encoded secret is found like a plain one."""
    forms = []
    if "%" in text and _PERCENT_ESCAPE.search(text):
        forms.append(unquote(text))
    for match in _HEX_RUN.finditer(text):
        if (decoded := _text_of(bytes.fromhex(match.group()))) is not None:
            forms.append(decoded)
    for match in _BASE64_RUN.finditer(text):
        if (decoded := _base64_text(match.group())) is not None:
            forms.append(decoded)
    return forms


def scan_text(text: str, *, _depth: int = 0) -> list[str]:
    """Kinds of secret found in one string (empty when clean), read as it is and decoded (decoded_forms)."""
    if is_ciphertext(text):
        return []
    # The service's own ids are not secrets. A ULID's time characters spell "A3T" and sixteen more capitals and
    # digits follow, the shape of an AWS access key id, for 32 ms in every 17.5 minutes: every id made then would
    # be refused wherever it is quoted back (a URL, a correction's body).
    text = OWN_ID.sub("id", text)
    kinds = list(dict.fromkeys(_own_checks(text)))
    for line in text.splitlines() or [text]:
        if not _may_hold_plugin_secret(line):
            continue
        for found in scan_line(line):
            kind = found.type.lower().replace(" ", "_")
            if kind not in kinds:
                kinds.append(kind)
    if _depth < _MAX_DECODE_DEPTH:
        for form in decoded_forms(text):
            for kind in scan_text(form, _depth=_depth + 1):
                if kind not in kinds:
                    kinds.append(kind)
    return kinds


def _walk(value: Any, location: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield location, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(str(key), f"{location}.<key>" if location else "<key>")
            yield from _walk(item, f"{location}.{key}" if location else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{location}[{index}]")


def scan_payload(payload: Any, *, cache: dict[str, list[str]] | None = None) -> list[Finding]:
    """Scan every string in a JSON-like payload, keys included.

    ``cache`` (string -> kinds) lets a batch scan each distinct string once: the same keys and
    many of the same values recur in every item, and detect-secrets costs ~80 us per string."""
    findings: list[Finding] = []
    for location, text in _walk(payload, ""):
        if cache is None:
            kinds = scan_text(text)
        elif text in cache:
            kinds = cache[text]
        else:
            kinds = cache[text] = scan_text(text)
        for kind in kinds:
            findings.append(Finding(kind=kind, location=location))
    return findings


def describe(findings: list[Finding]) -> str:
    parts = sorted({f"{f.kind} in {f.location}" for f in findings})
    return "Refused: the request contains what looks like a secret (" + "; ".join(parts) + \
        "). Secrets are never stored; remove it and retry."


def refuse_secrets(payload: Any, *, cache: dict[str, list[str]] | None = None) -> None:
    """422 ``secret_detected`` when any string of ``payload`` looks like a secret (the gates' secret step)."""
    findings = scan_payload(payload, cache=cache)
    if findings:
        raise SecretDetected(describe(findings))


# Where a secret can sit in a log line: a path segment, a query parameter (name=value kept together, so
# "api_key=..." is seen whole), a header value; split at what separates them, keeping the separators.
_LOG_PIECES = re.compile(r"([\s/?&\"'()\[\];,]+)")
_LETTER, _DIGIT = re.compile(r"[A-Za-z]"), re.compile(r"\d")
# What can state a secret in words across pieces ("my password is ..."): checked on the whole line.
_IN_WORDS = (_PASSWORD_IN_WORDS, _CREDENTIAL_ASSIGNMENT, _ID_KEYWORD, _RECOVERY_CODES)
REDACTED = "[REDACTED]"
WITHHELD = f"{REDACTED} (withheld whole: it held what looks like a secret)"


def _may_be_secret(piece: str) -> bool:
    """Whether a piece of a log line can be a secret at all: every finding of the scan needs at least 8
    characters with letters and digits together, an assignment or an encoding, or a long run of digits
    (cards, ID numbers). Plain words, versions, addresses and short numbers are not scanned."""
    if len(piece) < 8:
        return False
    if "=" in piece or "%" in piece or "+" in piece:
        return True
    digits = len(_DIGIT.findall(piece))
    if digits >= 9 and ":" not in piece:  # a time of day is digits and colons
        return True
    return digits > 0 and _LETTER.search(piece) is not None


@lru_cache(maxsize=4096)
def _piece_is_secret(piece: str) -> bool:
    return bool(scan_text(piece) or (("%" in piece or "+" in piece) and scan_text(unquote_plus(piece))))


def redact_secrets(line: str) -> str:
    """``line`` with every piece that looks like a secret replaced by [REDACTED]: for log lines that repeat
    a request's path and query string. Only pieces that can hold a secret are scanned (a log line of
    plain words costs a few regex searches, a repeated piece a cache lookup); a secret stated in words
    across pieces withholds the whole line."""
    pieces = _LOG_PIECES.split(line)
    for i in range(0, len(pieces), 2):
        if _may_be_secret(pieces[i]) and _piece_is_secret(pieces[i]):
            pieces[i] = REDACTED
    redacted = "".join(pieces)
    words = unquote_plus(redacted)
    lower = words.lower()
    if any(k in lower for k in _WORD_KEYS) and any(pattern.search(words) for pattern in _IN_WORDS):
        return WITHHELD
    if _SPACED_NUMBER.search(words) and _numbers_in_words(words):
        return WITHHELD
    return redacted


# Cheap gates before the regexes above (each costs 15-60 us on a log line): a word each needs, and
# digits in spaced groups (a card's 4-4-4-4, an SSN's 3-2-4, a NINO's 2-2-2).
_WORD_KEYS = ("pass", "pin", "key", "token", "bearer", "ssn", "social", "national", "licen", "tax", "recovery",
              "backup", "2fa", "mfa", "one-time", "one time")
_SPACED_NUMBER = re.compile(r"\d{2,4}[ -]\d{2,4}[ -]\d{2,4}")


def _numbers_in_words(text: str) -> bool:
    """A card or ID number written with spaces, so in several pieces of a line."""
    if _US_SSN.search(text) or _UK_NINO.search(text):
        return True
    return any(_luhn_ok(re.sub(r"\D", "", m.group())) for m in _CARD_CANDIDATE.finditer(text)
               if 13 <= len(re.sub(r"\D", "", m.group())) <= 19)
