"""/api/v1/. Each area keeps its own url module so the areas can grow independently."""

from django.urls import include, path

from api import docs
from api.views import identity, memories

app_name = "api"

urlpatterns = [
    # Areas with their own url modules first.
    path("", include("api.urls_retrieval")),
    path("", include("api.urls_threads")),
    path("", include("api.urls_procedures")),
    path("", include("api.urls_deletion")),
    path("", include("api.urls_knowledge")),
    path("health", identity.HealthApi.as_view(), name="health"),
    path("principal-tokens", identity.PrincipalTokenCreateApi.as_view(), name="principal-tokens"),
    path("memories", memories.MemoryListCreateApi.as_view(), name="memories"),
    # Before memories/<id>: "batch" is not a memory id.
    path("memories/batch", memories.MemoryBatchApi.as_view(), name="memories-batch"),
    path("memories/<str:memory_id>", memories.MemoryDetailApi.as_view(), name="memory-detail"),
    path("memories/<str:memory_id>/history", memories.MemoryHistoryApi.as_view(), name="memory-history"),
    path("memories/<str:memory_id>/correct", memories.MemoryCorrectApi.as_view(), name="memory-correct"),
    path("outcomes", memories.OutcomeCreateApi.as_view(), name="outcomes"),
    path("candidates", memories.CandidateCreateApi.as_view(), name="candidates"),
    # The contract, public like the health check: the OpenAPI document, and two readers of it served from
    # this host (drf-spectacular-sidecar's files; no request leaves it).
    path("schema", docs.SchemaView.as_view(), name="schema"),
    path("docs/", docs.swagger_ui, name="docs"),
    path("redoc/", docs.redoc, name="redoc"),
]
