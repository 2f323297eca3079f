"""Poison flags: what a reviewer should look at twice before a proposal becomes persistent behaviour.

One poisoned conversation must never become a procedure. These rules do not decide anything:
flags never approve, reject or hide a proposal; they are shown to the reviewer with an explanation
and the words that triggered them. They look at what the proposal *adds* (lines not in the base
version) and at its rationale, so a procedure that already mentions its own URL is not re-flagged.

The rule list (code: what it catches):

- ``widen_permissions``: asks to grant the agent more scopes, roles, access or privileges
  ("grant yourself admin", "add the write scope", "full access", "elevate privileges").
- ``disable_review``: asks to skip, bypass or turn off review, approval, audit or logging
  ("skip review", "auto-approve", "no approval needed", "disable audit logging").
- ``exfiltrate_data``: asks to send, export, forward or upload memories, records, credentials or
  "all data" somewhere ("send all memories to", "export every record", "forward the conversation").
- ``new_contact``: a URL, host or e-mail address that is not in the base version and not in
  ``ALLOWED_HOSTS`` (settings ``ENGRAM_PROCEDURE_ALLOWED_HOSTS``, default none).
- ``agent_instructions``: text aimed at the agent that reads the procedure rather than at the task
  ("ignore previous instructions", "you are now", "system:", "new instructions", role tokens such
  as ``<|im_start|>`` or ``[INST]``, "do not tell the user").
- ``hidden_text``: invisible or direction-changing characters (zero-width, bidi overrides) that
  can hide words from the reviewer.

The last two rules live in ``memory/policy/injection.py``: retrieval flags packets with the same ones.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from django.conf import settings

from memory.policy.injection import hidden_characters, instruction_phrases


class Flag(TypedDict):
    code: str
    title: str
    explanation: str
    evidence: list[str]


@dataclass(frozen=True)
class Rule:
    code: str
    title: str
    explanation: str
    find: Callable[[str, str], list[str]]  # (added text, base body) -> matched snippets


def _phrases(*patterns: str) -> Callable[[str, str], list[str]]:
    compiled = [re.compile(p, re.IGNORECASE) for p in patterns]

    def find(added: str, base: str) -> list[str]:
        return [m.group(0) for rx in compiled for m in rx.finditer(added)]

    return find


_URL = re.compile(r"\b(?:https?|ftp|wss?)://[^\s<>\"')\]]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_BARE_HOST = re.compile(r"\b(?:[a-z0-9-]+\.)+(?:com|net|org|io|ai|dev|xyz|ru|cn|info|biz|co|me|app)\b",
                        re.IGNORECASE)


def _contacts(text: str) -> set[str]:
    """URLs' hosts, e-mail addresses and bare domain names, lower-cased."""
    found: set[str] = set()
    for url in _URL.findall(text):
        host = re.sub(r"^[a-z]+://", "", url, flags=re.IGNORECASE).split("/")[0].split(":")[0]
        found.add(host.rstrip(".,;:!?").lower())
    found |= {e.lower() for e in _EMAIL.findall(text)}
    without_emails = _EMAIL.sub(" ", _URL.sub(" ", text))
    found |= {h.lower() for h in _BARE_HOST.findall(without_emails)}
    return found


def _new_contacts(added: str, base: str) -> list[str]:
    allowed = {h.lower() for h in settings.ENGRAM_PROCEDURE_ALLOWED_HOSTS}
    known = _contacts(base) | allowed
    return sorted(c for c in _contacts(added) if c not in known and c.split("@")[-1] not in allowed)


def _hidden(added: str, base: str) -> list[str]:
    return hidden_characters(added)


_AGENT = r"(?:yourself|you|me|this agent|the agent|agents?|the assistant|the model|my key|this key)"

RULES: tuple[Rule, ...] = (
    Rule("widen_permissions", "Widens its own permissions",
         "Asks for more scopes, roles, access or privileges for the agent. Procedures describe how to do "
         "a task; permissions are granted by operators, never by the text an agent reads.",
         _phrases(rf"\b(?:grant|give|assign|add)\s+{_AGENT}\b[^.\n]{{0,40}}\b(?:admin|root|write|mint|"
                  r"scope|permissions?|access|role|privileges?)\b",
                  r"\b(?:add|request|enable)\s+the\s+(?:write|mint|propose|admin)\s+(?:scope|permission)\b",
                  r"\b(?:elevate|escalate|raise)\s+(?:your\s+|its\s+|the\s+)?(?:privileges?|permissions?|"
                  r"access)\b",
                  r"\b(?:full|unrestricted|unlimited|admin(?:istrator)?|root)\s+access\b",
                  r"\bwithout\s+(?:any\s+)?(?:restrictions?|limits?)\b")),
    Rule("disable_review", "Disables review",
         "Asks to skip, bypass or turn off review, approval, audit or logging. Review is what keeps one "
         "conversation from becoming persistent behaviour.",
         _phrases(r"\b(?:skip|bypass|avoid|circumvent|disable|turn\s+off|switch\s+off|ignore)\s+(?:the\s+)?"
                  r"(?:human\s+|reviewer\s+)?(?:review|approval|audit(?:ing)?|logging|moderation|checks?)\b",
                  r"\bauto[-\s]?approv\w*\b",
                  r"\bwithout\s+(?:a\s+|any\s+)?(?:human\s+)?(?:review|approval|confirmation)\b",
                  r"\bno\s+(?:need\s+for\s+)?(?:review|approval)\s*(?:is\s+)?(?:needed|required)?\b",
                  r"\b(?:do\s+not|don't|never)\s+(?:log|audit|ask\s+for\s+approval)\b")),
    Rule("exfiltrate_data", "Exfiltrates data",
         "Asks to send, export, forward or upload memories, records, credentials or conversations "
         "somewhere. Procedures should never move data out of Engram.",
         _phrases(r"\b(?:send|e-?mail|post|forward|upload|export|transmit|copy|dump|leak|share)\s+"
                  r"(?:all|every|each|the\s+whole|the\s+full|any|your|these|the)?\s*"
                  r"(?:of\s+the\s+)?(?:user'?s?\s+)?(?:memor(?:y|ies)|records?|data|conversations?|"
                  r"history|credentials?|passwords?|tokens?|keys?|secrets?|files?|documents?)\b",
                  r"\b(?:all|every)\s+(?:memor(?:y|ies)|records?|user\s+data)\b[^.\n]{0,40}\bto\b")),
    Rule("new_contact", "Contacts a new URL or address",
         "Mentions a URL, host or e-mail address that the current version does not, and that is not on the "
         "allow-list. New destinations are how data leaves and how instructions come in.",
         _new_contacts),
    Rule("agent_instructions", "Instructions aimed at other agents",
         "Contains text addressed to the model that reads the procedure (to override its instructions or "
         "role) rather than steps of the task: the classic prompt-injection shape.",
         lambda added, base: instruction_phrases(added)),
    Rule("hidden_text", "Hidden characters",
         "Contains invisible or direction-changing characters that can hide words from the reviewer.",
         _hidden),
)


def added_text(base: str, proposed: str) -> str:
    """The lines the proposal adds or changes relative to its base."""
    diff = difflib.ndiff(base.splitlines(), proposed.splitlines())
    return "\n".join(line[2:] for line in diff if line.startswith("+ "))


def flags_for(*, base_body: str, proposed_body: str, rationale: str = "") -> list[Flag]:
    """Every rule that matches what the proposal adds (and its rationale), with the matching words."""
    added = added_text(base_body, proposed_body) + "\n" + rationale
    flags: list[Flag] = []
    for rule in RULES:
        evidence = list(dict.fromkeys(s.strip() for s in rule.find(added, base_body) if s.strip()))
        if evidence:
            flags.append(Flag(code=rule.code, title=rule.title, explanation=rule.explanation,
                              evidence=evidence[:5]))
    return flags
