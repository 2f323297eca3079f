"""The README and docs/ point only at files that ship: every relative link and every path they name
exists in the repository, and nothing points outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("memory", "api", "review", "procedures", "config", "bench", "tests", "templates", "docs")
LINK = re.compile(r"\]\(([^)#\s]+)")
PATH = re.compile(r"`((?:" + "|".join(TOP) + r")/[A-Za-z0-9_./{},-]*)`")
MIGRATION_LABEL = re.compile(r"^\w+/\d{4}")  # "memory/0002_..." names a migration, not a file


def _prose(text: str) -> str:
    """The text outside fenced code blocks (they show commands and trees, not references)."""
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _expanded(ref: str) -> list[str]:
    braces = re.match(r"(.*)\{([^}]*)\}(.*)", ref)
    return [braces.group(1) + part + braces.group(3) for part in braces.group(2).split(",")] if braces else [ref]


def _exists(ref: str) -> bool:
    path = ROOT / ref
    module = ref.split(".")[0]  # "memory/evaluation/runner.sync_tasks" names runner.py
    return path.exists() or (ROOT / f"{module}.py").exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_and_named_path_exists(doc: Path):
    text = _prose(doc.read_text())
    missing = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        assert (doc.parent / target).resolve().is_relative_to(ROOT), f"{doc.name} links outside: {target}"
        if not (doc.parent / target).resolve().exists():
            missing.append(target)
    for ref in PATH.findall(text):
        if MIGRATION_LABEL.match(ref):
            continue
        missing += [r for r in _expanded(ref) if not _exists(r)]

    assert missing == [], f"{doc.name} names files that do not exist: {missing}"


def _inside(path: Path) -> bool:
    return path.resolve().is_relative_to(ROOT)


UP_PATH = re.compile(r"(?<![\w./])(?:\.\./)+[\w.-][\w./-]*")


def test_nothing_points_outside_the_repository():
    """No relative path anywhere in a doc, code blocks included, leads out of the checkout: a person who
    clones the project has nothing beside it. A path is read from the doc's folder, and, when nothing is
    there, from the project's root (where commands run)."""
    outside = [f"{doc.name}: {ref}" for doc in DOCS for ref in UP_PATH.findall(doc.read_text())
               if not _inside(doc.parent / ref) or (not (doc.parent / ref).exists() and not _inside(ROOT / ref))]

    assert outside == []
