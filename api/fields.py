"""Input fields and checks shared by the API's input serializers."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.json_values import item_problem_of
from memory.errors import InvalidInput, ScopeMismatch
from memory.namespaces import MAX_DEPTH, NAME, InvalidNamespace, to_path
from memory.scope import Scope

MAX_VALUE_BYTES = 8000
# NAME for JSON Schema (ECMA anchors instead of Python's).
NAME_PATTERN = NAME.pattern.replace(r"\A", "^").replace(r"\Z", "$")
NAMESPACE_SCHEMA = {
    "type": "array", "items": {"type": "string", "pattern": NAME_PATTERN}, "minItems": 1, "maxItems": MAX_DEPTH,
    "description": "Lowercase segments, outermost first, e.g. `[\"user\", \"travel_preferences\"]`.",
    "example": ["user", "travel_preferences"],
}


@extend_schema_field(NAMESPACE_SCHEMA)
class NamespaceField(serializers.Field):
    """["user", "travel_preferences"] in, "user/travel_preferences" inside."""

    default_error_messages = {"invalid": "A namespace is a list of lowercase segments, e.g. [\"user\", \"prefs\"]."}

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str):
            data = data.split("/")
        if not isinstance(data, list):
            self.fail("invalid")
        try:
            return to_path(data)
        except InvalidNamespace as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def to_representation(self, value: str) -> list[str]:
        return value.split("/")


@extend_schema_field({
    "type": "string", "pattern": f"^{NAME_PATTERN[1:-1]}(/{NAME_PATTERN[1:-1]}){{0,{MAX_DEPTH - 1}}}$",
    "description": "A namespace as a path of lowercase segments, e.g. `user/travel_preferences`.",
    "example": "user/travel_preferences",
})
class NamespacePathField(NamespaceField):
    """A namespace in a query string: "user/travel_preferences" (the same rules as in a body)."""


class NameField(serializers.RegexField):
    def __init__(self, **kwargs: Any) -> None:
        # Not trimmed: a name with surrounding whitespace or a newline is refused, not quietly repaired.
        super().__init__(NAME, max_length=64, trim_whitespace=False, **kwargs)
        self.error_messages["invalid"] = "Use 1-64 lowercase letters, digits, '_', '-' or '.'."


def text_field(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(max_length=settings.ENGRAM_MAX_TEXT_CHARS, trim_whitespace=True, **kwargs)


def check_json_value(value: Any) -> Any:
    if len(json.dumps(value, default=str)) > MAX_VALUE_BYTES:
        raise serializers.ValidationError(f"The value is larger than {MAX_VALUE_BYTES} bytes.")
    return value


def item_problem(item: Any) -> InvalidInput | None:
    """A batch item's JSON problem (NUL, lone surrogate, out-of-range number, too deep) as its error.

    The body parser skips the items of ``per_item_fields`` so that a batch endpoint can answer one bad
    item with this error and still write the others."""
    problem = item_problem_of(item)
    return None if problem is None else InvalidInput(problem.sentence(), code=problem.code)


# Query and path integers (offsets, sequence numbers, versions) fit PostgreSQL's integer column type;
# an unbounded IntegerField lets 2**63 through to an OFFSET or a comparison that overflows.
MAX_QUERY_INT = 2**31 - 1


def integer(*, max_value: int = MAX_QUERY_INT, **kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(max_value=max_value, **kwargs)


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo or a server-owned field is an error, not a no-op."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


def check_body_scope(data: Any, scope: Scope) -> None:
    """A subject_id in a body never widens scope: if it disagrees with the token, refuse."""
    if isinstance(data, dict) and "subject_id" in data and data["subject_id"] != scope.subject_external_id:
        raise ScopeMismatch("The body's subject_id differs from the principal token's subject.")
