"""Memory classes: match a namespace to its class (longest prefix) and check what the model may do."""

from __future__ import annotations

from memory.errors import PolicyRefused
from memory.models import MemoryClass
from memory.namespaces import is_under

# What each write path needs from the class's model permission.
WRITE_PATH_NEEDS = {
    "confirmed": {MemoryClass.ModelPermission.WRITE},
    "candidate": {MemoryClass.ModelPermission.WRITE, MemoryClass.ModelPermission.PROPOSE},
}


def class_for_namespace(*, tenant_id: int, namespace: str) -> MemoryClass | None:
    """The class whose namespace prefix is the longest one containing ``namespace``."""
    segments = namespace.split("/")
    prefixes = ["/".join(segments[:i]) for i in range(len(segments), 0, -1)]
    by_prefix = {c.namespace_prefix: c for c in MemoryClass.objects.filter(
        tenant_id=tenant_id, namespace_prefix__in=prefixes)}
    for prefix in prefixes:
        if prefix in by_prefix:
            return by_prefix[prefix]
    return None


def require_class(*, tenant_id: int, namespace: str, path: str) -> MemoryClass:
    """The class for a write on ``path`` ("confirmed" or "candidate"), or 422 class_not_allowed."""
    memory_class = class_for_namespace(tenant_id=tenant_id, namespace=namespace)
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


def class_covers(memory_class: MemoryClass, namespace: str) -> bool:
    return is_under(namespace, memory_class.namespace_prefix)
