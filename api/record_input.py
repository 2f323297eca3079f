"""The input of a record write, parsed once for every path that takes one: the single writes' serializers
(POST /memories, /outcomes, /candidates), the batch's item parser and ``manage.py import_memories``,
so the command and the API validate an item by the same rules without the command importing a view."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from api.exceptions import _sentence, strings_of, without_echo
from api.fields import (
    NameField,
    NamespaceField,
    StrictSerializer,
    check_body_scope,
    check_json_value,
    item_problem,
    text_field,
)
from memory.errors import EngramError, InvalidInput
from memory.ids import new_event_id
from memory.models import MemoryType, SourceType
from memory.namespaces import MAX_DEPTH, NAME
from memory.records.services import OUTCOME_SOURCE_TYPES, RecordInput


class FactIn(StrictSerializer):
    field = NameField(help_text="The fact's field: one record per (namespace, field) is active at a time.")
    value = serializers.JSONField(validators=[check_json_value], help_text="Any JSON value, stored verbatim.")


class ReferenceIn(StrictSerializer):
    system = serializers.CharField(max_length=100, help_text="The system of record, e.g. `booking`.")
    id = serializers.CharField(max_length=200, help_text="The object's id there, e.g. `BK-77`.")


class SourceIn(StrictSerializer):
    type = serializers.CharField(max_length=32, required=False,
                                 help_text="The write path's source type (its default when left out): "
                                           "`explicit_user_statement` for /memories; `verified_outcome`, "
                                           "`system_of_record` or `org_record` for /outcomes; `model_inferred` "
                                           "for /candidates.")
    event_id = serializers.CharField(max_length=128, required=False,
                                     help_text="The source event's id and the write's idempotency key: the same id "
                                               "with the same body returns the first answer (200), with another "
                                               "body 409 `idempotency_conflict`. Generated when left out.")
    text = text_field(required=False, help_text="The words or observation the write came from (evidence).")
    occurred_at = serializers.DateTimeField(required=False)


class RecordIn(StrictSerializer):
    """An explicit statement: what the user said, stored as a confirmed record."""

    subject_id = serializers.CharField(max_length=128, required=False,
                                       help_text="Optional; must equal the principal token's subject (400 "
                                                 "`scope_mismatch` otherwise). It never widens scope.")
    namespace = NamespaceField()
    kind = NameField(help_text="What sort of memory, e.g. `preference`.")
    type = serializers.ChoiceField(choices=MemoryType.choices, default=MemoryType.SEMANTIC)
    fact = FactIn()
    text = text_field(required=False, help_text="The sentence retrieval serves; `field: value` when left out.")
    source = SourceIn(required=False)  # type: ignore[assignment]
    valid_from = serializers.DateTimeField(required=False)
    valid_until = serializers.DateTimeField(required=False, help_text="After this the record reads as expired.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("valid_from") and attrs.get("valid_until") and attrs["valid_until"] <= attrs["valid_from"]:
            raise serializers.ValidationError({"valid_until": "valid_until must be after valid_from."})
        return attrs


class OutcomeIn(RecordIn):
    """A deterministic outcome: the verified state (`fact`) or a `reference` to it, verbatim."""

    fact = FactIn(required=False)
    field = NameField(required=False, help_text="The fact's field when a reference is given instead of a state.")
    reference = ReferenceIn(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if ("fact" in attrs) == ("reference" in attrs):
            raise serializers.ValidationError("Give either the verified state as 'fact' or a 'reference'.")
        if "reference" in attrs and "field" not in attrs:
            raise serializers.ValidationError({"field": "A reference needs the field it stands for."})
        return attrs


class CandidateIn(RecordIn):
    """A model-inferred candidate: stored pending, never a fact until consolidation (and, where policy says,
    a reviewer) confirms it."""

    evidence = serializers.ListField(child=serializers.DictField(), required=False, max_length=20,
                                     help_text="Quotes the inference rests on, e.g. `{\"event_id\", \"text\"}`.")
    confidence = serializers.FloatField(required=False, min_value=0, max_value=1,
                                        help_text="The model's own confidence; informs review, never decides.")


class MemoryBatchItemIn(OutcomeIn):
    """One item of a batch: an explicit statement (as POST /memories), or an outcome (as POST /outcomes)
    when it has a `reference` or an outcome `source.type`. Each item is checked on its own."""


def to_record_input(data: dict[str, Any], *, default_source: str) -> RecordInput:
    source = data.get("source", {})
    fact = data.get("fact") or {"field": data["field"], "value": None}
    reference = data.get("reference")
    text = data.get("text") or _default_text(fact["field"], fact["value"], reference)
    return RecordInput(
        namespace=data["namespace"], kind=data["kind"], field=fact["field"], value=fact["value"], text=text,
        event_id=source.get("event_id") or new_event_id(), source_type=source.get("type") or default_source,
        memory_type=data.get("type", MemoryType.SEMANTIC), event_text=source.get("text", ""),
        occurred_at=source.get("occurred_at"), valid_from=data.get("valid_from"),
        valid_until=data.get("valid_until"), source_ref=dict(reference) if reference else None,
    )


def _default_text(field: str, value: Any, reference: dict[str, Any] | None) -> str:
    # Deterministic, never a paraphrase: the field and the verbatim value (or the reference).
    if reference:
        return f"{field}: see {reference['system']} {reference['id']}"
    return f"{field}: {value}"


class BatchItemParser:
    """Validates items with the single-write serializers (an outcome when it says so, else a statement).

    One serializer instance per kind is reused for every item: DRF deep-copies the declared fields
    each time a serializer is instantiated, which cost more than the validation itself at 500 items.
    A plain statement (the shape of nearly every imported item) is checked by ``plain_statement``
    instead, to the same rules at a tenth of the cost; anything else, and every item it is not sure
    of, goes through the serializer, which words the error exactly as the single write does."""

    def __init__(self, scope: Any) -> None:
        self.scope = scope
        self.statement = RecordIn()
        self.outcome = OutcomeIn()

    def parse(self, item: dict[str, Any]) -> RecordInput | EngramError:
        problem = item_problem(item)
        if problem is not None:
            return problem
        data = plain_statement(item)
        if data is not None:
            return to_record_input(data, default_source=SourceType.EXPLICIT_USER_STATEMENT)
        return self.by_serializer(item)

    def by_serializer(self, item: dict[str, Any]) -> RecordInput | EngramError:
        """The serializers' answer for an item without a JSON problem."""
        given = item.get("source")
        source: dict[str, Any] = given if isinstance(given, dict) else {}
        is_outcome = "reference" in item or source.get("type") in OUTCOME_SOURCE_TYPES
        try:
            check_body_scope(item, self.scope)
            data = (self.outcome if is_outcome else self.statement).run_validation(item)
        except EngramError as exc:
            return exc
        except ValidationError as exc:
            return InvalidInput(_sentence(without_echo(exc.detail, strings_of(item))))
        default = SourceType.VERIFIED_OUTCOME if is_outcome else SourceType.EXPLICIT_USER_STATEMENT
        return to_record_input(data, default_source=default)


_PLAIN_KEYS = frozenset({"namespace", "kind", "type", "fact", "text", "source"})
_MEMORY_TYPES = frozenset(MemoryType.values)


def _max_length(serializer: type[serializers.Serializer], name: str) -> int:
    field = serializer().fields[name]
    assert isinstance(field, serializers.CharField) and field.max_length is not None
    return int(field.max_length)


# The lengths the serializers allow, read from them so that the two paths cannot drift apart.
_TEXT_LIMIT = _max_length(RecordIn, "text")
_PLAIN_SOURCE_LIMITS = {name: _max_length(SourceIn, name) for name in ("type", "event_id", "text")}
# A conversation turn's time: parsed by the serializer's own field (formats, time zone), without the serializer.
_OCCURRED_AT = SourceIn().fields["occurred_at"]
_PLAIN_SOURCE_KEYS = frozenset({*_PLAIN_SOURCE_LIMITS, "occurred_at"})


def _name(value: Any) -> bool:
    return type(value) is str and NAME.match(value) is not None


def _plain_text(value: Any, max_length: int) -> str | None:
    """A CharField's value (trimmed, not blank, not too long) when it is a string, else None."""
    if type(value) is not str:
        return None
    value = value.strip()
    return value if value and len(value) <= max_length else None


def plain_statement(item: Any) -> dict[str, Any] | None:
    """What ``RecordIn`` validates a plain statement to, or None when the item is anything else.

    Plain: only namespace, kind, type, fact {field, value}, text and source {type, event_id, text,
    occurred_at}, each a string of the right form (a non-outcome source type), a JSON value within its size. None
    hands the item to the serializer: it may be valid (dates, a subject_id, another shape) or not,
    and the serializer says which, and why. tests/api/test_batch_parser.py holds the two to the same
    answers."""
    if type(item) is not dict or not item.keys() <= _PLAIN_KEYS:
        return None
    namespace, fact = item.get("namespace"), item.get("fact")
    if type(namespace) is not list or not 0 < len(namespace) <= MAX_DEPTH or not all(map(_name, namespace)):
        return None
    memory_type = item.get("type", MemoryType.SEMANTIC.value)
    if not _name(item.get("kind")) or type(memory_type) is not str or memory_type not in _MEMORY_TYPES:
        return None
    if type(fact) is not dict or fact.keys() != {"field", "value"} or not _name(fact["field"]):
        return None
    value = fact["value"]
    if value is None:
        return None
    try:
        check_json_value(value)
    except serializers.ValidationError:
        return None
    data: dict[str, Any] = {"namespace": "/".join(namespace), "kind": item["kind"],
                            "type": memory_type, "fact": {"field": fact["field"], "value": value}}
    if "text" in item:
        if (text := _plain_text(item["text"], _TEXT_LIMIT)) is None:
            return None
        data["text"] = text
    if "source" in item:
        given = item["source"]
        if type(given) is not dict or not given.keys() <= _PLAIN_SOURCE_KEYS:
            return None
        source: dict[str, Any] = {}
        for key, limit in _PLAIN_SOURCE_LIMITS.items():
            if key in given:
                if (checked := _plain_text(given[key], limit)) is None:
                    return None
                source[key] = checked
        if "occurred_at" in given:
            if type(given["occurred_at"]) is not str:
                return None
            try:
                source["occurred_at"] = _OCCURRED_AT.run_validation(given["occurred_at"])
            except serializers.ValidationError:
                return None
        if source.get("type") in OUTCOME_SOURCE_TYPES:
            return None
        data["source"] = source
    return data
