"""Browser UI: /review/ for reviewers, /me/ for people and their own memories."""

from django.urls import include, path

from review import views

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("review.urls_queue")),
    path("", include("review.urls_procedures")),
    path("", include("review.urls_me")),
    path("", include("review.urls_retrievals")),
    path("", include("review.urls_overview")),
]
