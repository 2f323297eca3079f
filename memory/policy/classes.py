"""Memory classes: match a namespace to its class (longest prefix) and check what the model may do."""

from __future__ import annotations

from memory.errors import PolicyRefused
from memory.models import MemoryClass

# What each write path needs from the class's model permission. The model permission governs what
# agents (and the model's inferences, once approved or kept) may store; "owner" is the person
# correcting their own memory from /me/, which no model permission restricts.
WRITE_PATH_NEEDS: dict[str, set[str]] = {
    "confirmed": {MemoryClass.ModelPermission.WRITE},
    "candidate": {MemoryClass.ModelPermission.WRITE, MemoryClass.ModelPermission.PROPOSE},
    "owner": set(MemoryClass.ModelPermission.values),
}


def _prefixes(namespace: str) -> list[str]:
    segments = namespace.split("/")
    return ["/".join(segments[:i]) for i in range(len(segments), 0, -1)]


def pick_class(by_prefix: dict[str, MemoryClass], namespace: str) -> MemoryClass | None:
    """Longest-prefix match among already loaded classes (the batch writer loads them once)."""
    for prefix in _prefixes(namespace):
        if prefix in by_prefix:
            return by_prefix[prefix]
    return None


def class_for_namespace(*, tenant_id: int, namespace: str) -> MemoryClass | None:
    """The class whose namespace prefix is the longest one containing ``namespace``."""
    by_prefix = {c.namespace_prefix: c for c in MemoryClass.objects.filter(
        tenant_id=tenant_id, namespace_prefix__in=_prefixes(namespace))}
    return pick_class(by_prefix, namespace)


def check_class(memory_class: MemoryClass | None, *, namespace: str, path: str) -> MemoryClass:
    """422 class_not_allowed unless ``memory_class`` exists and lets agents write on ``path``."""
    if memory_class is None:
        raise PolicyRefused(f"No memory class covers namespace '{namespace}'; nothing may be stored there.")
    if memory_class.model_permission not in WRITE_PATH_NEEDS[path]:
        raise PolicyRefused(
            f"Memory class '{memory_class.name}' gives agents '{memory_class.model_permission}' permission, "
            f"which does not allow a {path} write."
        )
    return memory_class


def readable_by(memory_class: MemoryClass, role: str) -> bool:
    return role in (memory_class.allowed_readers or [])
