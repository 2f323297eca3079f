"""The retrieval log: what one retrieve call considered, kept, and dropped, and why.

A log quotes memory content (the candidates' text), so it belongs to the principal's subject, is
purged by deletion (memory/retrieval/deletion_surfaces.py) and expires with the shortest
retention of the memory classes it mentions.
"""

from __future__ import annotations

from django.db import models

from memory.ids import new_id


def new_retrieval_id() -> str:
    return new_id("ret")


class RetrievalLog(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_retrieval_id, editable=False)
    tenant = models.ForeignKey("memory.Tenant", on_delete=models.CASCADE, related_name="+")
    subject = models.ForeignKey("memory.Subject", on_delete=models.CASCADE, related_name="retrieval_logs")
    actor = models.CharField(max_length=64)
    agent_key_id = models.BigIntegerField(null=True, blank=True)
    query = models.TextField()
    # The request after validation and scope narrowing (namespaces, kinds, include, budget, limit).
    request = models.JSONField(default=dict)
    # One entry per candidate: {source, id, memory_id?, text, ranks, similarity, score, selected, reason}.
    candidates = models.JSONField(default=list)
    budget = models.JSONField(default=dict)
    dropped = models.JSONField(default=dict)
    timings_ms = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "subject", "created_at"], name="retrievallog_subject_idx")]

    def __str__(self) -> str:
        return self.id
