"""UI routes of the retrieval inspector."""

from django.urls import path

from review import views_retrievals

urlpatterns = [
    path("review/retrievals/", views_retrievals.retrievals, name="review-retrievals"),
    path("review/retrievals/<str:retrieval_id>/", views_retrievals.retrieval_detail, name="review-retrieval"),
]
