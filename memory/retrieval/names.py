"""People the question names: a record that names them too gets a little more relevance.

A question that names a person ("What did Anna paint?") is most often answered by what that person said or what was
said about them. In a long conversation between two or three people each name is in a large share of the records, so
BM25's IDF rightly makes it a weak word: it cannot tell the records about Anna from the rest, and the records about
the other person that share the question's topic words outrank hers. A capitalised word that does not start a
sentence is taken as a name; a record containing it gets ``NAME_BONUS`` (``ENGRAM_RECALL_NAME_BONUS``, 0.1) more
relevance (ranking.relevance): meant to order records of about the same relevance; a record clearly about the
question still beats the named person's unrelated ones (tests/retrieval/test_names.py). Nothing here knows any
particular name, speaker format or data set. What it changed on LoCoMo, and what was tried beside it (a second hop,
pseudo-relevance feedback, a spread over sessions): docs/retrieval.md, "More than one matching record".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.retrieval.ranking import NAME_BONUS, Ranked

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s$")


def named(query: str) -> set[str]:
    """The lower-cased capitalised words of ``query`` that do not start a sentence, a possessive's "'s" removed
    (words in capitals only, such as acronyms, are not names)."""
    names: set[str] = set()
    for sentence in _SENTENCE.split(query.strip()):
        for word in _WORD.findall(sentence)[1:]:
            if word[0].isupper() and len(word) > 1 and not word.isupper():
                names.add(_POSSESSIVE.sub("", word).lower())
    return names


def mark_names(query: str, items: Sequence[Ranked]) -> None:
    """Mark every item whose text contains a name the question contains (ranking.relevance adds the bonus)."""
    if NAME_BONUS <= 0:
        return
    names = named(query)
    if not names:
        return
    # Each name alone and with a possessive, against the words of the lower-cased text: one pass of the pattern per
    # candidate and no per-word substitution (every retrieve runs this over its whole pool).
    forms = names | {name + s for name in names for s in ("'s", "’s")}
    for item in items:
        item.names_match = not forms.isdisjoint(_WORD.findall(item.text.lower()))
