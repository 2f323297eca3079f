"""Output shapes that more than one area's views answer with, so no view module imports another."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.response import Response

from memory.deletion.models import DeletionJob


class DeletionAcceptedOut(serializers.Serializer):
    deletion_id = serializers.CharField()
    status = serializers.ChoiceField(choices=DeletionJob.Status.choices)
    status_url = serializers.CharField(help_text="GET it to follow the job until `completed`.")


def accepted(job: DeletionJob) -> Response:
    """The 202 body of DELETE /memories/{id} and DELETE /subject."""
    url = reverse("api:deletion-detail", kwargs={"deletion_id": job.pk})
    return Response({"deletion_id": job.pk, "status": job.status, "status_url": url},
                    status=status.HTTP_202_ACCEPTED)


class SeqRangeOut(serializers.Serializer):
    from_seq = serializers.IntegerField()
    to_seq = serializers.IntegerField()


class SummarizerOut(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
