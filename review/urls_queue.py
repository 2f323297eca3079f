"""UI routes of the queue area."""

urlpatterns: list = []
