"""/api/v1/ routes of the knowledge area."""

urlpatterns: list = []
