"""Secret scanning of a whole document, reporting *where* a secret is and never what it is.

The text is scanned paragraph by paragraph with the same detector as every memory write
(``memory.policy.secrets.scan_text``); a flagged paragraph is narrowed to the lines that trip the
detector alone (a private key block or a multi-line code list keeps the paragraph's span).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory.policy.secrets import scan_payload, scan_text

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class SecretSpan:
    kind: str
    field: str  # "text", or the JSON location in title / uri / metadata / external_id
    char_start: int | None = None
    char_end: int | None = None
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "field": self.field}
        if self.char_start is not None:
            data.update(char_start=self.char_start, char_end=self.char_end, line=self.line)
        return data

    def describe(self) -> str:
        if self.char_start is None:
            return f"{self.kind} in {self.field}"
        return f"{self.kind} in text at line {self.line}, characters {self.char_start}-{self.char_end}"


def _pieces(text: str, start: int, end: int, separator: re.Pattern[str]) -> list[tuple[int, int]]:
    spans, cursor = [], start
    for match in separator.finditer(text, start, end):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, end))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans, cursor = [], start
    while cursor < end:
        newline = text.find("\n", cursor, end)
        stop = end if newline == -1 else newline
        spans.append((cursor, stop))
        cursor = stop + 1
    return [(a, b) for a, b in spans if text[a:b].strip()]


def scan_document_text(text: str) -> list[SecretSpan]:
    found: list[SecretSpan] = []
    for p_start, p_end in _pieces(text, 0, len(text), _PARAGRAPH_BREAK):
        kinds = scan_text(text[p_start:p_end])
        if not kinds:
            continue
        narrowed = []
        for l_start, l_end in _line_spans(text, p_start, p_end):
            for kind in scan_text(text[l_start:l_end]):
                narrowed.append(SecretSpan(kind, "text", l_start, l_end, text.count("\n", 0, l_start) + 1))
        found.extend(narrowed or [SecretSpan(kind, "text", p_start, p_end, text.count("\n", 0, p_start) + 1)
                                  for kind in kinds])
    return found


def scan_document(*, text: str, fields: dict[str, Any]) -> list[SecretSpan]:
    spans = [SecretSpan(f.kind, f.location) for f in scan_payload(fields)]
    return spans + scan_document_text(text)


def describe(spans: list[SecretSpan]) -> str:
    parts = "; ".join(s.describe() for s in spans[:10])
    more = f"; and {len(spans) - 10} more" if len(spans) > 10 else ""
    return (f"Refused: the document contains what looks like a secret ({parts}{more}). "
            "Nothing was stored; remove it and retry.")
