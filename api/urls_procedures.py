"""/api/v1/ routes of the procedures area."""

urlpatterns: list = []
