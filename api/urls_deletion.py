"""/api/v1/ routes of the deletion area."""

urlpatterns: list = []
