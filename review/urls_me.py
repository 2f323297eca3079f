"""UI routes of the me area: a person's own memories."""

from django.urls import path

from review import views_me

urlpatterns = [
    path("me/", views_me.me_home, name="me"),
    path("me/export", views_me.me_export, name="me-export"),
    path("me/erase", views_me.me_erase, name="me-erase"),
    path("me/delete-selected", views_me.me_delete_selected, name="me-delete-selected"),
    path("me/memories/<str:memory_id>/", views_me.me_history, name="me-history"),
    path("me/memories/<str:memory_id>/correct", views_me.me_correct, name="me-correct"),
    path("me/memories/<str:memory_id>/delete", views_me.me_delete, name="me-delete"),
    path("me/memories/<str:memory_id>/confirm", views_me.me_confirm, name="me-confirm"),
    path("me/memories/<str:memory_id>/deny", views_me.me_deny, name="me-deny"),
    path("me/deletions/", views_me.me_deletions, name="me-deletions"),
    path("me/deletions/<str:deletion_id>", views_me.me_deletion, name="me-deletion"),
]
