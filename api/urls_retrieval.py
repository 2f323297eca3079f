"""/api/v1/ routes of the retrieval area."""

from django.urls import path

from api.views import retrieval

urlpatterns = [
    path("retrieve", retrieval.RetrieveApi.as_view(), name="retrieve"),
    path("retrievals/<str:retrieval_id>", retrieval.RetrievalDetailApi.as_view(), name="retrieval-detail"),
    path("facts", retrieval.FactApi.as_view(), name="facts"),
]
