"""/api/v1/ routes of the knowledge area."""

from django.urls import path

from api.views import knowledge

urlpatterns = [
    path("documents", knowledge.DocumentListCreateApi.as_view(), name="documents"),
    path("documents/batch", knowledge.DocumentBatchApi.as_view(), name="documents-batch"),
    path("documents/<int:document_id>", knowledge.DocumentDetailApi.as_view(), name="document-detail"),
]
