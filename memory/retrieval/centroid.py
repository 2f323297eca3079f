"""A subject's centroid (retrieval.SubjectCentroid): what all of its records say, as one direction.

Why. MiniLM places every turn of one person's conversations near one direction, that of small talk between these
two people, and a turn close to it is close to every question about them: in a subject of 600 turns, "Thanks, that
means a lot!" is about as similar to "What are her hobbies?" as the turn about pottery. Taking part of each record's
closeness to the subject's own direction off its similarity lets what the question asks decide instead (measured in
docs/retrieval.md, "Records close to everything the subject says").

How. With q the query vector, d a record's (or its window's) vector, u the direction (unit) and c the subject's mean
cosine with u, a record's similarity is ``cos(q, d) - g * (cos(d, u) - c)``, g being ``ENGRAM_RECALL_GENERIC``. For
unit d that is ``d · (q - g u) + g c``: the cosine with one shifted query vector, scaled, plus a constant. So the
statement asks with ``q - g u`` (the subject's HNSW indexes answer that as they answer q) and rescales; subtracting
the average ``c`` keeps the similarities on the scale the fusion's gate and lines were set on. In a subject of fewer
than 200 records a record's closeness is measured against the *other* records instead (candidates._record_similarity).

When. The worker counts the vectors it writes (records' and windows') against their subject's centroid, in their
transaction, and refreshes it: while the subject is still being derived (an import), only below 100 records and windows
or once half as many again were written since (recomputing reads every vector of the subject, 95 ms at 10,000 turns,
and the direction hardly moves meanwhile); once nothing of the subject is pending, after any write. So health's
``derived_pending`` reads 0 only with every centroid computed from everything written. Deletion recomputes it
(deletion_surfaces.py). A subject without one is scored with plain cosines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
from django.db import connection

from memory.retrieval.models import PendingContext, SubjectCentroid
from memory.retrieval.pending import pending_records
from memory.search import vector_literal

# While a subject is still being derived (an import): the number of its records and windows below which any vector
# written refreshes its centroid, and the share of them that must have been written since otherwise. Once nothing of
# it is pending, any vector written does.
EXACT_BELOW = 100
DRIFT = 0.5

_MEAN_SQL = """
SELECT avg(embedding)::text, count(*) FROM memory_memoryrecord
WHERE subject_id = %(subject)s AND status = 'active' AND embedding IS NOT NULL
"""

# A record's closeness to the others is its cosine with their sum (see candidates._record_similarity).
_CLOSENESS_SQL = """
SELECT (SELECT avg(((1 - (embedding <=> %(direction)s::vector)) * %(total)s - 1)
                   / sqrt(greatest(%(total)s * %(total)s - 2 * (1 - (embedding <=> %(direction)s::vector)) * %(total)s
                                   + 1, 1e-9)))
        FROM memory_memoryrecord WHERE subject_id = %(subject)s AND status = 'active' AND embedding IS NOT NULL),
       (SELECT avg(1 - (embedding <=> %(direction)s::vector)) FROM retrieval_recordcontext
        WHERE subject_id = %(subject)s AND embedding IS NOT NULL),
       (SELECT count(*) FROM retrieval_recordcontext WHERE subject_id = %(subject)s AND embedding IS NOT NULL),
       (SELECT tenant_id FROM memory_subject WHERE id = %(subject)s)
"""


def refresh(subject_id: int) -> bool:
    """Compute the subject's centroid from its live records and windows now; False (and none kept) when it has no
    live embedded record."""
    with connection.cursor() as cursor:
        cursor.execute(_MEAN_SQL, {"subject": subject_id})
        mean_text, records = cursor.fetchone()
        mean = np.asarray(json.loads(mean_text), dtype=np.float64) if mean_text else None
        length = float(np.linalg.norm(mean)) if mean is not None else 0.0
        if mean is None or length == 0.0:
            SubjectCentroid.objects.filter(subject_id=subject_id).delete()
            return False
        direction = (mean / length).astype(np.float32)
        total = length * int(records)  # the length of the records' sum
        cursor.execute(_CLOSENESS_SQL, {"subject": subject_id, "direction": vector_literal(direction.tolist()),
                                        "total": total})
        record_similarity, window_similarity, windows, tenant_id = cursor.fetchone()
    SubjectCentroid.objects.update_or_create(subject_id=subject_id, defaults={
        "tenant_id": tenant_id, "direction": direction, "total": total, "record_similarity": float(record_similarity),
        "window_similarity": float(window_similarity or 0.0), "records": int(records), "windows": int(windows),
        "changes": 0})
    return True


def vectors_written(written: Mapping[int, int]) -> list[int]:
    """Count the vectors just written per subject (0: none, but look again) against its centroid, and refresh those
    it leaves stale (see the module docstring); returns the subjects refreshed. Two small statements per subject:
    nothing here counts a subject's records (at 100,000 records that took 160 ms, for every task of an import)."""
    refreshed = []
    for subject_id in sorted(written):
        with connection.cursor() as cursor:
            cursor.execute("UPDATE retrieval_subjectcentroid SET changes = changes + %s WHERE subject_id = %s "
                           "RETURNING records + windows, changes", [written[subject_id], subject_id])
            row = cursor.fetchone()
            if row is not None:
                size, changes = row
                deriving = _deriving(subject_id)
        if row is None or (changes > 0 and (not deriving or size < EXACT_BELOW or changes > DRIFT * size)):
            refresh(subject_id)
            refreshed.append(subject_id)
    return refreshed


def _deriving(subject_id: int) -> bool:
    """Whether any of the subject's derived work is still to be done (both through indexes by subject)."""
    return (pending_records().filter(subject_id=subject_id).exists()
            or PendingContext.objects.filter(subject_id=subject_id).exists())


def refresh_missing() -> int:
    """Compute the centroid of every subject that has live embedded records and none; returns how many."""
    subjects = missing()
    for subject_id in subjects:
        refresh(subject_id)
    return len(subjects)


def missing() -> list[int]:
    """Subjects with live embedded records and no centroid (written before centroids existed, or by a path no
    worker task followed): the periodic sweep's share of the work."""
    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT s.id FROM memory_subject s
            WHERE NOT EXISTS (SELECT 1 FROM retrieval_subjectcentroid c WHERE c.subject_id = s.id)
              AND EXISTS (SELECT 1 FROM memory_memoryrecord r
                          WHERE r.subject_id = s.id AND r.status = 'active' AND r.embedding IS NOT NULL)
            ORDER BY s.id""")
        return [row[0] for row in cursor.fetchall()]
