"""The shape the design promises, checked on the source: the areas never import the API or the UI,
no project import is wrapped in a fallback, and nothing clears the shared cache wholesale."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("memory", "api", "review", "procedures", "config")


def _sources(*packages: str) -> list[Path]:
    return [p for package in packages for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_domain_code_does_not_import_the_api_or_the_ui():
    offending = []
    for path in _sources("memory", "procedures", "review"):
        forbidden = ("api",) if path.parts[len(ROOT.parts)] == "review" else ("api", "review")
        offending += [f"{path.relative_to(ROOT)}: {name}" for name in _imports(ast.parse(path.read_text()))
                      if name.split(".")[0] in forbidden]

    assert offending == []


def test_no_project_import_falls_back_when_it_breaks():
    """A broken import must fail loudly, not switch a check off."""
    offending = []
    for path in _sources(*PROJECT):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Try):
                continue
            caught = {getattr(h.type, "id", "") for h in node.handlers if h.type is not None}
            imported = [n for stmt in node.body for n in _imports(stmt)]
            if caught & {"ImportError", "ModuleNotFoundError"} and any(
                    n.split(".")[0] in PROJECT for n in imported):
                offending.append(f"{path.relative_to(ROOT)}:{node.lineno}")

    assert offending == []


def test_nothing_clears_the_shared_cache():
    """Cache entries that can hold a subject's data are keyed by a version per subject or tenant; a
    global clear would also drop the worker's heartbeat and every other tenant's entries."""
    offending = []
    for path in _sources(*PROJECT):
        tree = ast.parse(path.read_text())
        if "django.core.cache" not in _imports(tree):
            continue
        offending += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr == "clear" and getattr(node.func.value, "id", "") == "cache"]

    assert offending == []
