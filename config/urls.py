from django.contrib import admin
from django.urls import include, path

from config.observability import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("api.urls")),
    path("metrics", metrics_view, name="metrics"),
    path("", include("review.urls")),
]
