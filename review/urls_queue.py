"""UI routes of the queue area: /review/ for reviewers."""

from django.urls import path

from review import views_queue as views

urlpatterns = [
    path("review/", views.queue, name="review-queue"),
    path("review/bulk", views.bulk, name="review-bulk"),
    path("review/candidates/<str:candidate_id>/approve", views.candidate_approve, name="review-candidate-approve"),
    path("review/candidates/<str:candidate_id>/edit", views.candidate_edit, name="review-candidate-edit"),
    path("review/candidates/<str:candidate_id>/reject", views.candidate_reject, name="review-candidate-reject"),
    path("review/candidates/<str:candidate_id>/keep-current", views.candidate_keep_current,
         name="review-candidate-keep-current"),
    path("review/candidates/<str:candidate_id>/use-proposed", views.candidate_use_proposed,
         name="review-candidate-use-proposed"),
    path("review/conflicts/<int:conflict_id>/keep-current", views.conflict_keep_current,
         name="review-conflict-keep-current"),
    path("review/conflicts/<int:conflict_id>/use-proposed", views.conflict_use_proposed,
         name="review-conflict-use-proposed"),
]
