"""The shape the design promises, checked on the source: the areas never import the API or the UI,
no project import is wrapped in a fallback, nothing clears the shared cache wholesale, no import
circle (imports inside functions count), ``memory`` imports no higher area, only URL modules import
views, the people's and the agents' scopes come from one place each, and record state changes only
in the write gate and deletion."""

from __future__ import annotations

import ast
import functools
import re
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
        area = path.parts[len(ROOT.parts)]
        forbidden = {"review": ("api",), "procedures": ("api", "review")}.get(area, ("api", "review", "procedures"))
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


# --- the module graph, imports inside functions included -------------------------------------------


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:``: annotations only, never run."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt)
                      if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


@functools.cache
def _graph() -> dict[str, set[str]]:
    paths = {_module(p): p for p in _sources(*PROJECT)}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in paths}
    for module, path in paths.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.split(".")[0] in PROJECT and (found := resolve(target)) and found != module:
                    graph[module].add(found)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle():
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_memory_imports_no_higher_area():
    graph = _graph()

    assert sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("memory")
                  for t in targets if t.split(".")[0] in ("api", "review", "procedures")) == []


def _is_view_module(module: str) -> bool:
    return module.startswith("api.views.") or re.fullmatch(r"review\.views(_\w+)?", module) is not None


def test_only_url_modules_import_views():
    graph = _graph()

    assert sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                  if _is_view_module(t) and not re.search(r"(^|\.)urls(_\w+)?$", m)) == []


MAX_LOCAL_IMPORTS = 20


def test_few_function_local_imports_each_with_its_reason():
    """An import inside a function hides an arrow from a reader; the few that must stay say why in a
    comment on the line or just above (the app registry not loaded yet, a config read before Django)."""
    local: list[str] = []
    unexplained: list[str] = []
    for path in _sources(*PROJECT):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if not any(n.split(".")[0] in PROJECT for n in names):
                    continue
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                local.append(where)
                if "#" not in lines[node.lineno - 1] and not lines[node.lineno - 2].strip().startswith("#"):
                    unexplained.append(where)

    assert len(local) <= MAX_LOCAL_IMPORTS, local
    assert unexplained == []


# --- one gate for people, one constructor per kind of caller ---------------------------------------

ACCESS_MODULES = ("memory/identity/access.py", "memory/models.py", "memory/scope.py")
# The reviewer predicate (Tenant.reviewers) and the owner predicate (Subject.users), as lookups.
PREDICATE = re.compile(r"(^|__)(reviewers|users)($|__)")


def test_the_reviewer_and_owner_predicates_are_written_once():
    offending = []
    for path in _sources(*PROJECT):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ACCESS_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                offending += [f"{relative}:{node.lineno}: {k.arg}=" for k in node.keywords
                              if k.arg and PREDICATE.search(k.arg)]
            elif isinstance(node, ast.Attribute) and node.attr in ("reviewer_tenants", "subjects") and \
                    isinstance(node.ctx, ast.Load) and relative.startswith("review/"):
                offending.append(f"{relative}:{node.lineno}: .{node.attr}")

    assert offending == []


def test_scopes_are_built_only_by_their_constructors():
    offending = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in _sources(*PROJECT, "bench")
                 if p.relative_to(ROOT).as_posix() != "memory/scope.py"
                 for node in ast.walk(ast.parse(p.read_text()))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Scope"]

    assert offending == []


# --- record state changes only in the write gate and deletion ---------------------------------------
# Every other path would skip the write-permission check and the per-record audit row. Derived columns
# are the exception by design: the embedding and the full-text vector are rebuilt from the record
# (``manage.py reembed``) and carry no state of their own.
RECORD_PACKAGES = (*PROJECT, "bench")
ALLOWED = ("memory/records/gate.py", "memory/deletion/")
# Rebuilt from the record; may be written by the indexers.
DERIVED = {"embedding", "blended_embedding", "search_vector", "context_terms"}
STATE = {"status", "status_reason", "superseded_by", "superseded_by_id", "supersedes", "supersedes_id", "fact",
         "text", "value", "valid_until", "confidence", "source_type", "namespace", "field"}


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
                # The SET of that UPDATE (a statement may hold other writes before it, e.g. in a CTE).
                update = sql.split("update memory_memoryrecord", 1)[1]
                assignments = update.split(" set ", 1)[1].split(" from ")[0] if " set " in update else ""
                columns = {part.split("=")[0].strip() for part in assignments.split(",") if "=" in part}
                if columns - DERIVED:
                    found.append((node.lineno, f"UPDATE memory_memoryrecord SET {', '.join(sorted(columns))}"))
    return found


def test_only_the_gate_and_deletion_change_records():
    offending = []
    for path in _sources(*RECORD_PACKAGES):
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


# --- database mechanics in memory/db/ ----------------------------------------------------------------
# Rows written by COPY and SQL composed with psycopg.sql are mechanics, kept apart from the policy that uses them
# (memory/db/bulk.py, memory/db/statements.py), so that how a statement is built is read and changed in one place.
DB_ROOM = "memory/db/"
# Allowed elsewhere, each for its reason.
DB_MECHANICS_ELSEWHERE = {
    # The retrieval benchmark loads up to 100,000 synthetic records and chunks by binary COPY on purpose,
    # bypassing the gate: it measures reading them, not writing them.
    "bench/retrieval.py",
}


def _db_mechanics(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        # psycopg's cursor.copy(statement) always names its statement; dict.copy() and list.copy() take nothing.
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "copy" \
                and (node.args or node.keywords):
            found.append((node.lineno, "….copy(statement)"))
        elif isinstance(node, ast.ImportFrom) and node.module == "psycopg" and any(
                a.name == "sql" for a in node.names):
            found.append((node.lineno, "from psycopg import sql"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("psycopg.sql"):
            found.append((node.lineno, f"from {node.module} import …"))
        elif isinstance(node, ast.Import) and any(a.name.startswith("psycopg.sql") for a in node.names):
            found.append((node.lineno, "import psycopg.sql"))
        elif isinstance(node, ast.Attribute) and node.attr == "sql" and getattr(node.value, "id", "") == "psycopg":
            found.append((node.lineno, "psycopg.sql"))
    return found


def test_copy_and_sql_composition_only_in_the_database_room():
    offending = []
    for path in _sources(*PROJECT, "bench"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(DB_ROOM) or relative in DB_MECHANICS_ELSEWHERE:
            continue
        offending += [f"{relative}:{line}: {what}" for line, what in _db_mechanics(ast.parse(path.read_text()))]

    assert offending == []


def test_the_check_sees_copy_and_composition():
    shapes = [
        "with cursor.cursor.copy('COPY t (a) FROM STDIN') as copy: pass",
        "from psycopg import sql",
        "from psycopg.sql import SQL, Identifier",
        "import psycopg.sql",
        "psycopg.sql.SQL('SELECT 1')",
    ]

    assert [len(_db_mechanics(ast.parse(s))) for s in shapes] == [1] * len(shapes)
    assert _db_mechanics(ast.parse("options = defaults.copy()")) == []
    assert all(path.exists() for path in (ROOT / p for p in DB_MECHANICS_ELSEWHERE))
