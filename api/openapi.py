"""The parts of the OpenAPI description every area shares: the error shape and the meaning of each
error code, the two credentials, the request headers several operations take, and the tags.

Each view documents its own operation with ``@extend_schema`` and names the error codes it can give
(``errors(...)``); the codes come from what the view, its services and the authentication raise, so a
client generator or a person reading /api/v1/docs/ learns every answer an operation may give.
tests/gate/test_openapi_conformance.py calls the operations and checks each answer against this.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from api.fields import StrictSerializer
from api.permissions import HasPrincipal


class ErrorOut(serializers.Serializer):
    """Every error answer: a stable code to branch on and a sentence for a person."""

    code = serializers.CharField(help_text="Stable and machine-readable: branch on this, never on `detail`.")
    detail = serializers.CharField(help_text="One sentence for a person; its wording may change.")

    def get_fields(self) -> dict[str, serializers.Field]:
        # `errors` is also a Serializer attribute, so this field cannot be declared on the class.
        return {**super().get_fields(),
                "errors": serializers.DictField(required=False, help_text="With `invalid`: the problems of each "
                                                                          "field, by field.")}


class PreconditionFailedOut(ErrorOut):
    current_version = serializers.IntegerField(help_text="The checkpoint's version now (0: none yet); read it, "
                                                         "merge, and retry with its ETag.")


class SecretFindingOut(serializers.Serializer):
    kind = serializers.CharField(help_text="What was found, e.g. `AWS Access Key`; never the secret itself.")
    field = serializers.CharField(help_text="Where: `text`, or the place in `title`, `uri`, `external_id` or "
                                            "`metadata`.")
    line = serializers.IntegerField(required=False, help_text="In `text`: the 1-based line of the converted text.")
    char_start = serializers.IntegerField(required=False, help_text="In `text`: the finding's character span.")
    char_end = serializers.IntegerField(required=False)


class SecretDetectedOut(ErrorOut):
    findings = SecretFindingOut(many=True, required=False,
                                help_text="Documents only: where each finding is, never its content.")


# Every error code the API gives: its status and what it means to the caller.
ERROR_CODES: dict[str, tuple[int, str]] = {
    # 400: the request itself
    "invalid": (400, "A body field or query parameter is not valid; `errors` names each field."),
    "malformed_json": (400, "The body is not valid JSON."),
    "payload_too_large": (400, "The body is larger than the server accepts."),
    "too_deep": (400, "The body's JSON is nested deeper than the server accepts."),
    "scope_mismatch": (400, "The body's `subject_id` differs from the principal token's subject."),
    "invalid_source_type": (400, "`source.type` does not belong to this write path."),
    "batch_too_large": (400, "The batch holds more items than the endpoint accepts."),
    "invalid_filter": (400, "A retrieve filter is not a string or a list of strings."),
    "invalid_include": (400, "`include` names an unknown source."),
    "invalid_namespace": (400, "A namespace grant is not a valid namespace."),
    "invalid_ttl": (400, "`ttl` is outside 1 .. the server's maximum token lifetime."),
    "invalid_display_name": (400, "`display_name` is longer than 200 characters or holds control characters."),
    "invalid_idempotency_key": (400, "The Idempotency-Key header is empty or longer than 200 characters."),
    "invalid_workflow_id": (400, "The workflow id is longer than 128 characters."),
    "invalid_precondition": (400, 'If-Match is not one version ETag such as `"3"`, or If-None-Match is not `*`.'),
    "unknown_thread": (400, "The checkpoint's `thread_id` names no thread of this subject."),
    "unknown_event": (400, "`corrects` or `referenced_event_ids` names an event not in this thread."),
    "invalid_range": (400, "The seq range is not inside the thread's events."),
    "document_too_large": (400, "The document's text is longer than the server accepts."),
    "empty_document": (400, "The document has no text once converted."),
    "empty_body": (400, "The proposed procedure body is empty."),
    # 401: who is calling
    "not_authenticated": (401, "No `Authorization: Bearer <agent key>` header."),
    "invalid_key": (401, "The agent key is malformed, unknown or revoked."),
    "principal_required": (401, "No `X-Engram-Principal` token on an endpoint that acts for a subject."),
    "invalid_principal": (401, "The principal token is malformed, forged, or its subject no longer exists."),
    "principal_expired": (401, "The principal token has expired: mint a new one."),
    # 403: what the caller may do
    "tenant_mismatch": (403, "The principal token belongs to another tenant than the agent key."),
    "insufficient_scope": (403, "The agent key lacks the scope this operation needs."),
    "namespace_forbidden": (403, "The principal's namespace grant does not reach what was asked for."),
    # 404: another subject's or tenant's object answers exactly like a missing one
    "not_found": (404, "No such object for this principal."),
    "no_fresh_summary": (404, "The thread has no fresh summary."),
    "base_version_not_found": (404, "The procedure has no such `base_version`."),
    # 409: the state of things
    "idempotency_conflict": (409, "The idempotency key (event id, Idempotency-Key, tool call key) was used for "
                                  "a different request; use a new key."),
    "tombstoned": (409, "This content or its source event was deleted; it cannot be written again."),
    "not_active": (409, "Only an active memory can be corrected."),
    "correction_outranked": (409, "A higher-authority record stands for this field; the correction cannot "
                                  "replace it."),
    "conflict": (409, "Precedence cannot choose between two records; `records` lists them."),
    "event_deleted": (409, "The event to correct was deleted."),
    "thread_busy": (409, "The thread's events kept changing while it was summarized; try again."),
    "outcome_already_recorded": (409, "The tool call already has its outcome."),
    "deletion_incomplete": (409, "The deleted document could still be read; deleting again resumes the job."),
    # 412 / 428: optimistic concurrency on checkpoints
    "precondition_failed": (412, "The checkpoint moved on since its ETag was read; nothing was written."),
    "precondition_required": (428, 'Send `If-Match: "<version>"` (or `If-None-Match: *` for the first '
                                   "checkpoint)."),
    # 422: policy
    "class_not_allowed": (422, "No memory class takes this namespace, or its class does not let the agent "
                               "write (or propose) there."),
    "secret_detected": (422, "The content holds a secret (key, card number, password...); nothing was stored."),
    # 429: how often
    "throttled": (429, "Past the agent key's rate (or, without a valid key, the address's); `Retry-After` says when "
                       "to try again."),
    # 503: a dependency
    "database_unavailable": (503, "The database did not answer; nothing was written. Retry later."),
    "summarizer_unavailable": (503, "The configured summarizer service failed; nothing was written."),
    "batch_interrupted": (503, "The process serving the batch stopped before it answered: the batch (one "
                               "transaction) was written whole or not at all. Retry it; items already written are "
                               "matched by their ids."),
}

# The codes every operation that acts for a subject can give before its own code runs.
# (throttled: past the key's rate; database_unavailable: the database did not answer, nothing was written.)
AGENT = ("not_authenticated", "invalid_key", "principal_required", "invalid_principal", "principal_expired",
         "tenant_mismatch", "insufficient_scope", "throttled", "database_unavailable")
# ... and what any JSON body can get wrong.
BODY = ("invalid", "malformed_json", "payload_too_large", "too_deep")
# Error answers whose body carries more than code and detail.
ERROR_BODIES: dict[str, type[ErrorOut]] = {"precondition_failed": PreconditionFailedOut,
                                           "secret_detected": SecretDetectedOut}


# What the examples of error answers with a larger body show besides code and detail.
EXAMPLE_EXTRAS: dict[str, dict[str, Any]] = {"precondition_failed": {"current_version": 4}, "conflict": {"records": []}}


def errors(*codes: str, bodies: dict[int, Any] | None = None) -> dict[int, OpenApiResponse]:
    """The error responses of an operation from the codes it can give: one response per status, its
    description listing each code, and one example per code (what Swagger UI shows)."""
    by_status: dict[int, list[str]] = defaultdict(list)
    for code in dict.fromkeys(codes):
        by_status[ERROR_CODES[code][0]].append(code)
    out = {}
    for status, names in sorted(by_status.items()):
        body = (bodies or {}).get(status) or next((ERROR_BODIES[c] for c in names if c in ERROR_BODIES), ErrorOut)
        out[status] = OpenApiResponse(
            body,
            description="\n".join(f"- `{c}`: {ERROR_CODES[c][1]}" for c in names),
            examples=[OpenApiExample(c, value={"code": c, "detail": ERROR_CODES[c][1], **EXAMPLE_EXTRAS.get(c, {})},
                                     status_codes=[status], response_only=True) for c in names],
        )
    return out


def written(body: Any, *, new: str, again: str, status: int = 201) -> dict[int, OpenApiResponse]:
    """The answers of an idempotent write: ``status`` when it wrote, 200 when it had written it before."""
    return {status: OpenApiResponse(body, description=new), 200: OpenApiResponse(body, description=again)}


def documented_codes(response: dict[str, Any]) -> set[str]:
    """The codes an error response of the generated schema documents (one example each)."""
    examples = response.get("content", {}).get("application/json", {}).get("examples", {})
    return {example["value"]["code"] for example in examples.values()}


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER,
    description="Makes a retry safe: the same key with the same body returns the original event (200); the "
                "same key with another body is 409 `idempotency_conflict`. 1-200 characters.")
IF_MATCH = OpenApiParameter(
    "If-Match", str, OpenApiParameter.HEADER,
    description='The ETag of the checkpoint you read, e.g. `"3"`: the write succeeds only if it is still the '
                "current version (412 `precondition_failed` otherwise). Required once a checkpoint exists.")
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match", str, OpenApiParameter.HEADER, enum=["*"],
    description="`*` creates the workflow's first checkpoint (412 if one exists already).")
ETAG = OpenApiParameter(
    "ETag", str, OpenApiParameter.HEADER, response=[200, 201],
    description='The checkpoint\'s version as an entity tag, e.g. `"3"`: send it back as If-Match.')


class Tags:
    MEMORIES = "memories"
    RETRIEVAL = "retrieval"
    THREADS = "threads"
    WORKFLOWS = "workflows"
    KNOWLEDGE = "knowledge"
    PROCEDURES = "procedures"
    DELETION = "deletion and privacy"
    IDENTITY = "identity"
    HEALTH = "health"


TAGS = [
    {"name": Tags.MEMORIES, "description": "Long-term memory records: the three write paths (explicit statement, "
                                           "verified outcome, inferred candidate), batches, reads, history and "
                                           "corrections."},
    {"name": Tags.RETRIEVAL, "description": "Typed packets with provenance within a token budget, the log of why "
                                            "each candidate was kept or dropped, and exact facts."},
    {"name": Tags.THREADS, "description": "Thread state: an append-only event log per conversation and summaries "
                                          "that record their source range."},
    {"name": Tags.WORKFLOWS, "description": "Workflow checkpoints (optimistic concurrency with ETags) and tool "
                                            "calls recorded before their side effect."},
    {"name": Tags.KNOWLEDGE, "description": "Documents in access domains, chunked and indexed for retrieval."},
    {"name": Tags.PROCEDURES, "description": "Versioned, reviewed instructions: agents read them and propose "
                                             "changes; a reviewer publishes. Every other write is refused with "
                                             "403 `procedure_read_only`."},
    {"name": Tags.DELETION, "description": "Deletion jobs that reach every surface, subject erasure and export."},
    {"name": Tags.IDENTITY, "description": "Principal tokens, minted by the tenant's trusted backend."},
    {"name": Tags.HEALTH, "description": "Liveness of the service, its database and its worker."},
]


class EngramAutoSchema(AutoSchema):
    """Component names are the serializers' class names without the In/Out suffix the views use:
    RecordIn is documented as RecordRequest, RecordOut as Record."""

    def get_serializer_name(self, serializer: serializers.Serializer,
                            direction: Literal["request", "response"]) -> str:
        name = super().get_serializer_name(serializer, direction)
        for suffix in ("In", "Out"):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name


def doc_excludes() -> list[type]:
    """Docstrings above these classes are not descriptions: StrictSerializer's explains our code."""
    from drf_spectacular.plumbing import get_lib_doc_excludes

    return [*get_lib_doc_excludes(), StrictSerializer]


# What each path parameter names, wherever it appears.
PATH_PARAMETERS = {
    "memory_id": "A memory record's id (`mem_…`).",
    "retrieval_id": "A retrieval's id (`ret_…`), from its retrieve answer.",
    "deletion_id": "A deletion job's id (`del_…`), from the answer that started it.",
    "thread_id": "A thread's id (`thr_…`).",
    "event_id": "A thread event's id (`evt_…`).",
    "workflow_id": "The workflow's id, chosen by the agent (at most 128 characters).",
    "key": "The tool call's idempotency key, as recorded.",
    "document_id": "A document's id.",
    "name": "A procedure's name.",
    "number": "A version number: 1, 2, …",
    "proposal_id": "A proposal's id (`prp_…`).",
}


def tags_and_path_parameters(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: the tags, described, in this order; and what each path parameter names."""
    result["tags"] = TAGS
    for item in result["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in PATH_PARAMETERS:
                    parameter.setdefault("description", PATH_PARAMETERS[parameter["name"]])
    return result


AGENT_KEY, PRINCIPAL = "agentKey", "principalToken"


class AgentCredentials(OpenApiAuthenticationExtension):
    """Two credentials that go together: the agent key says which agent (and tenant) calls, the
    principal token for whom. Minting a token needs only the key."""

    target_class = "api.authentication.AgentKeyAuthentication"
    match_subclasses = True  # the deletion status view tolerates tokens of erased subjects
    name = [AGENT_KEY, PRINCIPAL]

    def get_security_definition(self, auto_schema: AutoSchema) -> list[dict[str, Any]]:
        return [
            {"type": "http", "scheme": "bearer", "bearerFormat": "egk_…",
             "description": "The agent key: `Authorization: Bearer egk_…` (created by an operator with "
                            "`manage.py create_agent_key`; scopes read, write, propose, mint)."},
            {"type": "apiKey", "in": "header", "name": "X-Engram-Principal",
             "description": "The principal token `ept_…`: a signed, expiring grant naming the subject (and "
                            "optionally namespaces), minted with POST /api/v1/principal-tokens."},
        ]

    def get_security_requirement(self, auto_schema: AutoSchema) -> dict[str, list[Any]]:
        needs_principal = any(isinstance(p, HasPrincipal) for p in auto_schema.view.get_permissions())
        return {AGENT_KEY: [], PRINCIPAL: []} if needs_principal else {AGENT_KEY: []}
