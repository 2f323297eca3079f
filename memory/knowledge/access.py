"""Who may read an access domain, as one SQL fragment shared by every knowledge read.

A principal reads a domain when
1. the domain is in the principal's tenant, and
2. the principal's subject is a reader: ``all_subjects``, listed in ``readers``, or of a kind in
   ``reader_kinds``, and
3. when the key or token is restricted to namespaces, one of them is ``knowledge`` (every domain)
   or ``knowledge/<domain name>`` (the reserved grant names of memory/scope.py). An unrestricted key
   (namespaces None) has no such limit.

Writing additionally needs the key's ``write`` permission (services.py). The fragment is used
verbatim by the selectors (``id IN (<fragment>)``) and by both legs of the retrieval provider, so
the domain predicate is always inside the SQL that reads chunks.
"""

from __future__ import annotations

from typing import Any

from django.db.models.expressions import RawSQL

from memory.scope import KNOWLEDGE, Scope

_READABLE_SQL = """
SELECT d.id FROM knowledge_accessdomain d
WHERE d.tenant_id = %s
  AND (d.all_subjects
       OR EXISTS (SELECT 1 FROM knowledge_accessdomain_readers r
                  WHERE r.accessdomain_id = d.id AND r.subject_id = %s)
       OR EXISTS (SELECT 1 FROM memory_subject s
                  WHERE s.id = %s AND s.tenant_id = d.tenant_id AND s.kind = ANY(d.reader_kinds)))
"""


def granted_domain_names(scope: Scope) -> list[str] | None:
    """Domain names the scope's namespace grants allow; None = no restriction."""
    if scope.namespaces is None:
        return None
    names: list[str] = []
    for prefix in scope.namespaces:
        if prefix == KNOWLEDGE:
            return None
        head, _, rest = prefix.partition("/")
        if head == KNOWLEDGE and rest and "/" not in rest:
            names.append(rest)
    return names


def readable_domains_sql(scope: Scope, *, names: list[str] | None = None) -> tuple[str, list[Any]]:
    """SQL selecting the ids of the domains ``scope`` may read (optionally only those ``names``)."""
    sql = _READABLE_SQL
    params: list[Any] = [scope.tenant_id, scope.subject_id, scope.subject_id]
    granted = granted_domain_names(scope)
    for allowed in (granted, names):
        if allowed is not None:
            sql += " AND d.name = ANY(%s)"
            params.append(list(allowed))
    return sql, params


def readable_domain_ids(scope: Scope, *, names: list[str] | None = None) -> RawSQL:
    sql, params = readable_domains_sql(scope, names=names)
    return RawSQL(sql, params)
