"""/api/v1/ routes of the procedures area (read-only to agents, except proposals)."""

from django.urls import path

from api.views import procedures as v

urlpatterns = [
    path("procedures", v.ProcedureListApi.as_view(), name="procedures"),
    path("procedures/<str:name>", v.ProcedureDetailApi.as_view(), name="procedure-detail"),
    path("procedures/<str:name>/versions", v.VersionListApi.as_view(), name="procedure-versions"),
    path("procedures/<str:name>/versions/<int:number>", v.VersionDetailApi.as_view(), name="procedure-version"),
    path("procedures/<str:name>/proposals", v.ProposalListCreateApi.as_view(), name="procedure-proposals"),
    path("procedures/<str:name>/proposals/<str:proposal_id>", v.ProposalDetailApi.as_view(),
         name="procedure-proposal"),
    # Last: whatever else is tried below a procedure (…/approve, …/publish, …/versions/x) is refused.
    path("procedures/<str:name>/<path:rest>", v.BelowProcedureApi.as_view(), name="procedure-other"),
]
