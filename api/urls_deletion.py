"""/api/v1/ routes of the deletion area (DELETE /memories/{id} is on the memories detail route)."""

from django.urls import path

from api.views import deletion

urlpatterns = [
    path("subject", deletion.SubjectEraseApi.as_view(), name="subject"),
    path("deletions/<str:deletion_id>", deletion.DeletionDetailApi.as_view(), name="deletion-detail"),
    path("export", deletion.ExportApi.as_view(), name="export"),
]
