"""Principal tokens (minted by the tenant's trusted backend) and the health check."""

from __future__ import annotations

from django.db import connection
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.authentication import principal_of
from api.fields import NamespaceField, StrictSerializer, integer
from api.permissions import HasAgentKey
from memory.identity.services import principal_token_mint, principal_token_verify


class PrincipalTokenCreateApi(APIView):
    permission_classes = [HasAgentKey]

    class InputSerializer(StrictSerializer):
        subject_id = serializers.CharField(max_length=128)
        ttl = integer(required=False, min_value=1)
        namespaces = serializers.ListField(child=NamespaceField(), required=False, allow_empty=False)

    def post(self, request: Request) -> Response:
        principal = principal_of(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, subject, expires_at = principal_token_mint(
            tenant=principal.key.tenant, subject_external_id=data["subject_id"], ttl=data.get("ttl"),
            namespaces=data.get("namespaces"), actor=principal.actor, minted_by=principal.key,
        )
        return Response({"token": token, "subject_id": subject.external_id, "expires_at": expires_at,
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

    from memory.queues import QUEUES

    now = timezone.now()
    rows = {r["key"]: r for r in OrmQ.objects.values("key").annotate(
        queued=Count("id", filter=Q(lock__lte=now)), running=Count("id", filter=Q(lock__gt=now)))}
    return {q: {"queued": rows.get(q, {}).get("queued", 0), "running": rows.get(q, {}).get("running", 0)}
            for q in QUEUES}


class HealthApi(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []  # load balancers poll it

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
            from memory.models import MemoryRecord

            body["embeddings_pending"] = MemoryRecord.objects.filter(
                embedding__isnull=True, memory_class__embed=True, status="active").count()
            body["queues"] = queue_depths()
        return Response(body, status=200 if database == "ok" else 503)
