"""The splitter: paragraphs, then sentences, then words, packed under a token cap with overlap.

Rules, in order:
1. Tokens are counted with the embedding model's own tokenizer (``get_embedder().count_tokens``),
   so a chunk never exceeds what the model reads (all-MiniLM-L6-v2 truncates at 256 word pieces).
2. A document whose whole text fits under the cap is exactly one chunk (its stripped text).
3. Otherwise the text is cut into *units*: paragraphs (separated by a blank line); a paragraph
   over the cap is cut into sentences (after ``.``, ``!`` or ``?`` followed by white space); a
   sentence over the cap is cut into runs of words that fit.
4. Units are packed greedily, in order, into chunks of at most ``max_tokens``. Each new chunk
   starts with the trailing units of the previous chunk that fit in ``overlap_tokens`` (never the
   whole previous chunk), so a fact cut at a boundary still appears whole in one chunk.
5. Every chunk is a contiguous span ``text[char_start:char_end]`` of the document's text, so
   citations point into the source.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memory.embedder import get_embedder

DEFAULT_MAX_TOKENS = 200
DEFAULT_OVERLAP_TOKENS = 40

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class ChunkSpan:
    ordinal: int
    text: str
    char_start: int
    char_end: int
    token_count: int


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    tokens: int


def _spans(text: str, start: int, end: int, separator: re.Pattern[str]) -> list[tuple[int, int]]:
    """Non-blank pieces of text[start:end] between matches of ``separator``, stripped, as spans."""
    pieces: list[tuple[int, int]] = []
    cursor = start
    for match in separator.finditer(text, start, end):
        pieces.append((cursor, match.start()))
        cursor = match.end()
    pieces.append((cursor, end))
    result = []
    for a, b in pieces:
        piece = text[a:b]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            result.append((a + lead, a + lead + len(stripped)))
    return result


def _units(text: str, max_tokens: int, count: Callable[[str], int]) -> list[_Unit]:
    units: list[_Unit] = []
    for p_start, p_end in _spans(text, 0, len(text), _PARAGRAPH_BREAK):
        tokens = count(text[p_start:p_end])
        if tokens <= max_tokens:
            units.append(_Unit(p_start, p_end, tokens))
            continue
        for s_start, s_end in _spans(text, p_start, p_end, _SENTENCE_END):
            tokens = count(text[s_start:s_end])
            if tokens <= max_tokens:
                units.append(_Unit(s_start, s_end, tokens))
            else:
                units.extend(_word_runs(text, s_start, s_end, max_tokens, count))
    return units


def _word_runs(text: str, start: int, end: int, max_tokens: int, count: Callable[[str], int]) -> list[_Unit]:
    runs: list[_Unit] = []
    run_start: int | None = None
    run_end = start
    run_tokens = 0
    for word in _WORD.finditer(text, start, end):
        word_tokens = count(word.group())
        if run_start is not None and run_tokens + word_tokens > max_tokens:
            runs.append(_Unit(run_start, run_end, run_tokens))
            run_start = None
        if run_start is None:
            run_start, run_tokens = word.start(), 0
        run_end = word.end()
        run_tokens += word_tokens
    if run_start is not None:
        runs.append(_Unit(run_start, run_end, run_tokens))
    return runs


def split(text: str, *, max_tokens: int = DEFAULT_MAX_TOKENS, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
          count_tokens: Callable[[str], int] | None = None) -> list[ChunkSpan]:
    """Chunks of ``text`` (see the module docstring). Empty or blank text gives no chunks."""
    if max_tokens < 1 or not 0 <= overlap_tokens < max_tokens:
        raise ValueError("need max_tokens >= 1 and 0 <= overlap_tokens < max_tokens")
    if count_tokens is None:
        count_tokens = get_embedder().count_tokens
    stripped = text.strip()
    if not stripped:
        return []
    whole = count_tokens(stripped)
    if whole <= max_tokens:
        start = len(text) - len(text.lstrip())
        return [ChunkSpan(0, stripped, start, start + len(stripped), whole)]

    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    for unit in _units(text, max_tokens, count_tokens):
        if current and sum(u.tokens for u in current) + unit.tokens > max_tokens:
            groups.append(current)
            current = _overlap(current, overlap_tokens)
            if sum(u.tokens for u in current) + unit.tokens > max_tokens:
                current = []
        current.append(unit)
    if current:
        groups.append(current)

    chunks = []
    for ordinal, group in enumerate(groups):
        start, end = group[0].start, group[-1].end
        body = text[start:end]
        chunks.append(ChunkSpan(ordinal, body, start, end, sum(u.tokens for u in group)))
    return chunks


def _overlap(previous: list[_Unit], overlap_tokens: int) -> list[_Unit]:
    tail: list[_Unit] = []
    total = 0
    for unit in reversed(previous[1:]):  # never carry the whole previous chunk
        if total + unit.tokens > overlap_tokens:
            break
        tail.insert(0, unit)
        total += unit.tokens
    return tail
