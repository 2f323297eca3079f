"""No code outside the write gate (memory/records/gate.py) and deletion (memory/deletion/) changes a
memory record's state: every other path would skip the write-permission check and the per-record audit
row. Checked on the source, so a new shortcut fails here before it ships.

Derived columns are the exception by design: the embedding and the full-text vector are rebuilt from
the record (``manage.py reembed``) and carry no state of their own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("memory", "api", "review", "procedures", "config", "bench")
ALLOWED = ("memory/records/gate.py", "memory/deletion/")
DERIVED = {"embedding", "search_vector"}  # rebuilt from the record; may be written by the indexers
STATE = {"status", "status_reason", "superseded_by", "superseded_by_id", "supersedes", "supersedes_id", "fact",
         "text", "value", "valid_until", "confidence", "source_type", "namespace", "field"}


def _sources() -> list[Path]:
    return [p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _record_writes(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if node.func.attr == "update" and _mentions(receiver, "MemoryRecord"):
                fields = {k.arg for k in node.keywords if k.arg}
                if fields - DERIVED:
                    found.append((node.lineno, f"MemoryRecord ….update({', '.join(sorted(fields))})"))
            elif node.func.attr == "update" and any(
                    k.arg == "status" and _mentions(k.value, "RecordStatus") for k in node.keywords):
                found.append((node.lineno, "….update(status=RecordStatus…)"))
            elif node.func.attr in ("bulk_update", "bulk_create", "create") and _mentions(receiver, "MemoryRecord"):
                found.append((node.lineno, f"MemoryRecord.objects.{node.func.attr}(…)"))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if isinstance(t, ast.Attribute) and t.attr == "status" and _mentions(node.value, "RecordStatus"):
                        found.append((node.lineno, ".status = RecordStatus…"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            sql = " ".join(node.value.split()).lower()
            if "update memory_memoryrecord" in sql:
                assignments = sql.split(" set ", 1)[1].split(" from ")[0] if " set " in sql else ""
                columns = {part.split("=")[0].strip() for part in assignments.split(",") if "=" in part}
                if columns - DERIVED:
                    found.append((node.lineno, f"UPDATE memory_memoryrecord SET {', '.join(sorted(columns))}"))
    return found


def test_only_the_gate_and_deletion_change_records():
    offending = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(ALLOWED):
            continue
        offending += [f"{relative}:{line}: {what}" for line, what in _record_writes(ast.parse(path.read_text()))]

    assert offending == []


def test_the_check_sees_a_raw_update():
    """The detector itself: each shape of a direct write is caught (so the test above can fail)."""
    shapes = [
        "MemoryRecord.objects.filter(pk=1).update(status=RecordStatus.SUPERSEDED)",
        "qs.update(status=RecordStatus.DELETED)",
        "MemoryRecord.objects.bulk_update(rows, ['status'])",
        "record.status = RecordStatus.SUPERSEDED",
        "cursor.execute('UPDATE memory_memoryrecord SET status = %s WHERE id = %s')",
    ]

    assert [len(_record_writes(ast.parse(s))) for s in shapes] == [1] * len(shapes)
    assert _record_writes(ast.parse("MemoryRecord.objects.filter(pk=1).update(embedding=None)")) == []
