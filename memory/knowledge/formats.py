"""Turning source files into plain text: txt and md as they are, HTML through BeautifulSoup.

HTML is parsed (not regex-stripped): scripts, styles and the head are dropped, block elements
become paragraph breaks (so the chunker sees the document's paragraphs), inline markup vanishes
and entities are decoded. The ``<title>`` becomes the document title when none is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup

HTML_TYPES = ("text/html", "application/xhtml+xml")
MIME_BY_SUFFIX = {".txt": "text/plain", ".text": "text/plain", ".md": "text/markdown",
                  ".markdown": "text/markdown", ".html": "text/html", ".htm": "text/html"}
_BLOCKS = ["p", "div", "section", "article", "header", "footer", "main", "aside", "nav", "h1", "h2", "h3",
           "h4", "h5", "h6", "li", "dt", "dd", "tr", "pre", "blockquote", "table", "ul", "ol", "dl",
           "figure", "figcaption", "hr"]
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*")


@dataclass(frozen=True)
class Converted:
    text: str
    title: str


def html_to_text(html: str) -> Converted:
    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "head", "noscript", "template", "svg"]):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for block in soup.find_all(_BLOCKS):
        block.insert_before("\n\n")
        block.insert_after("\n\n")
    raw = soup.get_text()
    lines = [_SPACES.sub(" ", line).strip() for line in raw.splitlines()]
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return Converted(text=text, title=title)


def to_text(raw: str, mime_type: str) -> Converted:
    if mime_type.split(";")[0].strip().lower() in HTML_TYPES:
        return html_to_text(raw)
    return Converted(text=raw.replace("\r\n", "\n").replace("\r", "\n"), title="")


def mime_type_for(path: Path) -> str | None:
    return MIME_BY_SUFFIX.get(path.suffix.lower())
