"""UI routes of the procedures area."""

urlpatterns: list = []
