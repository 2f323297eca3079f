"""Instruction-shaped text: what marks stored content as trying to steer the model that reads it.

Memory, summaries and knowledge are data. A remembered note that says "ignore previous instructions"
is still served (it is what the user said), but its packet carries ``flags: ["agent_instructions"]``
so the caller can quote it as data rather than obey it. The same rules flag procedure proposals for
reviewers (procedures/flags.py), so a phrase is suspicious in both places or in neither.

- ``agent_instructions``: text addressed to the model that reads it, overriding its instructions or
  role ("ignore previous instructions", "you are now", "system:", "new instructions:", role tokens
  such as ``<|im_start|>`` or ``[INST]``, "do not tell the user", "act as an unrestricted ...").
- ``hidden_text``: invisible or direction-changing characters (zero-width, bidi overrides) that can
  hide words from a person reading the text.
"""

from __future__ import annotations

import re

AGENT_INSTRUCTION_PATTERNS: tuple[str, ...] = (
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|"
    r"above|earlier|other|your|system)\s+(?:instructions?|prompts?|rules?|messages?)\b",
    r"\bforget\s+everything\b",
    r"\byou\s+are\s+now\b",
    r"\bnew\s+instructions?\s*:",
    r"(?im)^\s*(?:system|assistant|developer)\s*:",
    r"<\|im_start\|>|<\|system\|>|\[/?INST\]|<<SYS>>",
    r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to)\s+the\s+"
    r"(?:user|reviewer|human|operator)\b",
    r"\b(?:act|behave)\s+as\s+(?:if\s+you\s+were\s+|an?\s+)?(?:unrestricted|jailbroken|dan|"
    r"developer\s+mode)\b",
)
_AGENT_INSTRUCTIONS = [re.compile(p, re.IGNORECASE) for p in AGENT_INSTRUCTION_PATTERNS]
HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def instruction_phrases(text: str) -> list[str]:
    """The instruction-shaped phrases in ``text``."""
    return [m.group(0) for rx in _AGENT_INSTRUCTIONS for m in rx.finditer(text)]


def hidden_characters(text: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in sorted(set(HIDDEN.findall(text)))]


def content_flags(text: str) -> list[str]:
    """Flag codes for a packet's text: ``agent_instructions`` and/or ``hidden_text``, or none."""
    flags = []
    if instruction_phrases(text):
        flags.append("agent_instructions")
    if hidden_characters(text):
        flags.append("hidden_text")
    return flags
