"""/api/v1/ routes of the retrieval area."""

urlpatterns: list = []
