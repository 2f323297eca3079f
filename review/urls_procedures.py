"""UI routes of the procedures area: /review/procedures/."""

from django.urls import path

from review import views_procedures as v

urlpatterns = [
    path("review/procedures/", v.procedures_home, name="procedures-review"),
    path("review/procedures/proposals/<str:proposal_id>/", v.proposal_detail, name="procedure-proposal"),
    path("review/procedures/proposals/<str:proposal_id>/approve", v.proposal_approve_view,
         name="procedure-proposal-approve"),
    path("review/procedures/proposals/<str:proposal_id>/reject", v.proposal_reject_view,
         name="procedure-proposal-reject"),
    path("review/procedures/proposals/<str:proposal_id>/rebase/", v.proposal_rebase_view,
         name="procedure-proposal-rebase"),
    path("review/procedures/proposals/<str:proposal_id>/rebase", v.proposal_rebase_action,
         name="procedure-proposal-rebase-action"),
    path("review/procedures/<int:procedure_id>/", v.procedure_history, name="procedure-history"),
    path("review/procedures/<int:procedure_id>/versions/<int:number>/", v.version_detail,
         name="procedure-version"),
    path("review/procedures/<int:procedure_id>/versions/<int:number>/rollback", v.version_rollback,
         name="procedure-rollback"),
]
