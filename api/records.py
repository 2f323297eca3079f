"""The record shape every endpoint that returns a record shares (memory/records/presenters.py builds it):
memories, history, facts, batches, corrections and the export."""

from __future__ import annotations

from rest_framework import serializers

from memory.models import Confidence, MemoryClass, MemoryType, RecordStatus, SourceType


class ReferenceOut(serializers.Serializer):
    system = serializers.CharField()
    id = serializers.CharField()


class FactOut(serializers.Serializer):
    """The fact; empty (`{}`) once the record is deleted: its content is gone."""

    field = serializers.CharField(required=False)
    value = serializers.JSONField(required=False, allow_null=True)


class SourceOut(serializers.Serializer):
    type = serializers.ChoiceField(choices=SourceType.choices)
    event_id = serializers.CharField(allow_null=True)
    reference = ReferenceOut(required=False, help_text="Outcomes recorded by reference: where the state lives.")


class RecordOut(serializers.Serializer):
    """A long-term memory record with its provenance and lifecycle."""

    memory_id = serializers.CharField()
    subject_id = serializers.CharField()
    namespace = serializers.ListField(child=serializers.CharField())
    kind = serializers.CharField()
    type = serializers.ChoiceField(choices=MemoryType.choices)
    fact = FactOut()
    text = serializers.CharField()
    source = SourceOut()  # type: ignore[assignment]
    confidence = serializers.ChoiceField(choices=Confidence.choices,
                                         help_text="`candidate`: kept from an inference, not confirmed.")
    sensitivity = serializers.ChoiceField(choices=MemoryClass.Sensitivity.choices)
    memory_class = serializers.CharField()
    status = serializers.ChoiceField(choices=RecordStatus.choices)
    status_reason = serializers.CharField(help_text="Why the record is not active (empty when it is).")
    valid_from = serializers.DateTimeField(allow_null=True)
    valid_until = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    supersedes = serializers.CharField(allow_null=True)
    superseded_by = serializers.CharField(allow_null=True)


RECORD_EXAMPLE = {
    "memory_id": "mem_01JZ8Q6W3T0ZB9E1K7M4D2V5XA", "subject_id": "usr_42", "namespace": ["user", "travel_preferences"],
    "kind": "preference", "type": "semantic", "fact": {"field": "seat_preference", "value": "aisle"},
    "text": "Prefers aisle seats", "source": {"type": "explicit_user_statement", "event_id": "evt_seat_1"},
    "confidence": "confirmed", "sensitivity": "personal", "memory_class": "travel_preferences", "status": "active",
    "status_reason": "", "valid_from": None, "valid_until": None, "created_at": "2026-05-03T09:12:44.120Z",
    "supersedes": None, "superseded_by": None,
}
