"""UI routes of the operator's overview: /review/overview/ and the pages behind its figures."""

from django.urls import path

from review import views_overview as v

urlpatterns = [
    path("review/overview/", v.overview_home, name="overview"),
    path("review/overview/deletions/", v.overview_deletions, name="overview-deletions"),
    path("review/overview/deletions/<str:deletion_id>", v.overview_deletion, name="overview-deletion"),
    path("review/overview/deletions/<str:deletion_id>/retry", v.overview_deletion_retry,
         name="overview-deletion-retry"),
    path("review/overview/refusals/", v.overview_refusals, name="overview-refusals"),
    path("review/overview/embeddings/", v.overview_embeddings, name="overview-embeddings"),
    path("review/overview/worker/", v.overview_worker, name="overview-worker"),
    path("review/overview/retrievals/", v.overview_retrievals, name="overview-retrievals"),
]
