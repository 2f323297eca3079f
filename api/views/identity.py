"""Principal tokens (minted by the tenant's trusted backend) and the health check."""

from __future__ import annotations

from django.db import connection
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import principal_of
from api.fields import NamespaceField, StrictSerializer, integer
from api.openapi import AGENT, BODY, Tags, errors
from api.permissions import HasAgentKey
from memory.identity.services import principal_token_mint, principal_token_verify
from memory.queues import QUEUES
from memory.retrieval.derived import derived_pending_by_kind


class PrincipalTokenOut(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `X-Engram-Principal` with the agent key.")
    subject_id = serializers.CharField()
    display_name = serializers.CharField(help_text="What people's pages call the subject (\"\": unnamed).")
    expires_at = serializers.IntegerField(help_text="Unix time, in seconds.")
    namespaces = serializers.ListField(child=serializers.CharField(), allow_null=True,
                                       help_text="The granted namespaces as paths (`user/travel_preferences`); "
                                                 "null: every namespace the agent key allows.")


class PrincipalTokenCreateApi(APIView):
    permission_classes = [HasAgentKey]

    @extend_schema_serializer(component_name="PrincipalToken")
    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128, help_text="The tenant's own id for the subject; the "
                                                                     "subject is created on first use.")
        ttl = integer(required=False, min_value=1, help_text="Lifetime in seconds (default and "
                                                                              "maximum are the server's).")
        namespaces = serializers.ListField(child=NamespaceField(), required=False, allow_empty=False,
                                           help_text="Narrow the token to these namespaces; never wider than the "
                                                     "agent key.")
        display_name = serializers.CharField(max_length=200, required=False, allow_blank=True, trim_whitespace=True,
                                             help_text="The subject's name as people's pages show it (\"Alice "
                                                       "Martin\"); \"\" clears it. Omitted: unchanged.")

    @extend_schema(
        operation_id="principal_token_mint", tags=[Tags.IDENTITY], summary="Mint a principal token",
        description="For the tenant's trusted backend: a signed, expiring token naming the subject an agent acts "
                    "for. Needs the `mint` scope; no principal token is needed to call it.",
        request=InputSerializer,
        responses={201: PrincipalTokenOut, **errors(*BODY, *AGENT, "invalid_ttl", "namespace_forbidden",
                                                    "invalid_display_name")},
        examples=[OpenApiExample("For a user, narrowed", request_only=True, value={
            "subject_id": "usr_42", "ttl": 900, "namespaces": [["user", "travel_preferences"]]})])
    def post(self, request: Request) -> Response:
        principal = principal_of(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, subject, expires_at = principal_token_mint(
            tenant=principal.key.tenant, subject_external_id=data["subject_id"], ttl=data.get("ttl"),
            namespaces=data.get("namespaces"), actor=principal.actor, minted_by=principal.key,
            display_name=data.get("display_name"),
        )
        return Response({"token": token, "subject_id": subject.external_id, "display_name": subject.display_name,
                         "expires_at": expires_at,
                         "namespaces": principal_token_verify(token).namespaces}, status=status.HTTP_201_CREATED)


def worker_status() -> str:
    """'ok' when a qcluster reported itself alive recently (its stats live in the shared cache)."""
    from django_q.brokers import get_broker
    from django_q.status import Stat

    try:
        return "ok" if Stat.get_all(get_broker()) else "down"
    except Exception:  # noqa: BLE001 - an unreachable broker means the worker is down, not a 500
        return "down"


def queue_depths() -> dict[str, dict[str, int]]:
    """Tasks waiting and tasks claimed by a worker, per queue (memory.queues.QUEUES)."""
    from django.db.models import Count, Q
    from django.utils import timezone
    from django_q.models import OrmQ

    now = timezone.now()
    rows = {r["key"]: r for r in OrmQ.objects.values("key").annotate(
        queued=Count("id", filter=Q(lock__lte=now)), running=Count("id", filter=Q(lock__gt=now)))}
    return {q: {"queued": rows.get(q, {}).get("queued", 0), "running": rows.get(q, {}).get("running", 0)}
            for q in QUEUES}


class QueueDepthOut(serializers.Serializer):
    queued = serializers.IntegerField(help_text="Tasks waiting for a worker.")
    running = serializers.IntegerField(help_text="Tasks a worker has claimed.")


class DerivedPendingOut(serializers.Serializer):
    embeddings = serializers.IntegerField(help_text="Records waiting for their embedding.")
    context_windows = serializers.IntegerField(help_text="Conversation turns waiting for their context windows.")
    subject_indexes = serializers.IntegerField(help_text="Large subjects whose own indexes or term statistics are "
                                                         "due (retrieval scans them exactly meanwhile).")
    summaries = serializers.IntegerField(help_text="Thread summaries waiting to be regenerated or embedded.")
    knowledge_chunks = serializers.IntegerField(help_text="Document chunks waiting for their embedding.")


class HealthOut(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    database = serializers.ChoiceField(choices=["ok", "down"])
    worker = serializers.ChoiceField(choices=["ok", "down"], help_text="`ok` when a task worker reported recently.")
    embeddings_pending = serializers.IntegerField(required=False, help_text="Records waiting for their embedding "
                                                                           "(absent when the database is down).")
    derived_pending = serializers.IntegerField(
        required=False, help_text="Derived items of every kind not yet done; 0 means retrieval sees everything "
                                  "written (absent when the database is down).")
    derived_pending_by_kind = DerivedPendingOut(required=False, help_text="`derived_pending` per kind.")
    queues = serializers.DictField(child=QueueDepthOut(), required=False,
                                   help_text="Per work queue (`urgent`: deletions; `engram`: interactive; `bulk`: "
                                             "imports), absent when the database is down.")


class HealthApi(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []  # load balancers poll it

    @extend_schema(
        operation_id="health", tags=[Tags.HEALTH], summary="Is the service up?",
        description="No credentials. 200 while the database answers (the worker may still be down), 503 when "
                    "it does not.",
        responses={200: HealthOut, 503: OpenApiResponse(HealthOut, description="The database does not answer.")})
    def get(self, request: Request) -> Response:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            database = "ok"
        except Exception:  # noqa: BLE001
            database = "down"
        body: dict[str, object] = {"status": "ok" if database == "ok" else "degraded", "database": database,
                "worker": worker_status()}
        if database == "ok":
            by_kind = derived_pending_by_kind()
            body["embeddings_pending"] = by_kind["embeddings"]
            body["derived_pending"] = sum(by_kind.values())
            body["derived_pending_by_kind"] = by_kind
            body["queues"] = queue_depths()
        return Response(body, status=200 if database == "ok" else 503)
