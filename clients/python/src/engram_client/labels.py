"""A reversible encoding of any label (a LangGraph namespace label, a store key) onto Engram's name rule.

Engram's namespace segments and fact fields match ``[a-z0-9][a-z0-9_\\-.]{0,63}``. A label that already
matches it without a ``.`` is used as it is, so plain lower-case namespaces read the same in Engram (the
``/me/`` page, the REST API) as in your code. Any other label is written as ``x`` followed by the label
with each character outside ``[a-z0-9_-]`` escaped:

- an upper-case letter as ``.`` + the letter in lower case  (``Alice`` -> ``x.alice``)
- any other character as ``._`` + its code point in hex + ``_``  (``*`` -> ``x._2a_``, ``a\\n`` -> ``xa._a_``)

Plain labels never contain ``.``, so a segment with a ``.`` is always an encoded one, and decoding is
exact. An encoded label must still fit in 64 characters; a longer one is refused with ``ValueError``.
"""

from __future__ import annotations

import re

PLAIN = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
SEGMENT = re.compile(r"[a-z0-9][a-z0-9_\-.]{0,63}")
MARK = "x"
_SAFE = set("abcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPE = re.compile(r"\.(?:([a-z])|_([0-9a-f]+)_)")


def encode(label: str) -> str:
    """The Engram segment for ``label`` (unchanged when it is already a plain segment)."""
    if PLAIN.fullmatch(label):
        return label
    out = [MARK]
    for char in label:
        if char in _SAFE:
            out.append(char)
        elif "A" <= char <= "Z":
            out.append("." + char.lower())
        else:
            out.append(f"._{ord(char):x}_")
    out.append(".")
    encoded = "".join(out)
    if len(encoded) > 64:
        raise ValueError(f"The label {label!r} is too long for Engram once encoded ({len(encoded)} > 64 "
                         "characters): use a shorter label.")
    return encoded


def decode(segment: str) -> str:
    """The label an Engram segment stands for. Segments this module did not write come back unchanged."""
    if not (segment.startswith(MARK) and segment.endswith(".")):
        return segment
    body = segment[len(MARK):-1]
    out: list[str] = []
    position = 0
    for match in _ESCAPE.finditer(body):
        if "." in body[position:match.start()]:
            return segment  # not our escape syntax: someone else's name with a dot
        out.append(body[position:match.start()])
        letter, code = match.groups()
        out.append(letter.upper() if letter else chr(int(code, 16)))
        position = match.end()
    rest = body[position:]
    if "." in rest:
        return segment
    out.append(rest)
    return "".join(out)
