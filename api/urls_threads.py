"""/api/v1/ routes of the threads area."""

urlpatterns: list = []
