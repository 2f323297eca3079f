"""The check every question of bench/paraphrase_set.yaml must pass: it shares no content word with its answer.

Content words are the words left after a stop-word list; two words are the same when their crude stems are
equal or one stem begins the other (stricter than PostgreSQL's English stemmer, so a question that passes here
shares no lexeme with its answer in the lexical leg either).
"""

from __future__ import annotations

import re

_STOP_WORDS = """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing done down during each few for from further get gets got had has have having he
her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not of
off on once only or other our ours out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself s t don now
"""
STOP = frozenset(_STOP_WORDS.split())


def stem(word: str) -> str:
    word = word.lower().replace("'", "")
    for suffix in ("ings", "ing", "ies", "ied", "ed", "s", "ly", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> set[str]:
    return {stem(w) for w in re.findall(r"[a-z0-9']+", text.lower()) if w.replace("'", "") not in STOP}


def shared(a: str, b: str) -> set[str]:
    """The content stems of ``a`` that ``b`` also has (equal, or one a prefix of the other)."""
    sb = content_stems(b)
    return {x for x in content_stems(a) for y in sb if x == y or (min(len(x), len(y)) >= 4
                                                                     and (x.startswith(y) or y.startswith(x)))}
