"""UI routes of the me area."""

urlpatterns: list = []
