"""/api/v1/ routes of the threads area: threads, events, summaries; workflow checkpoints and tool calls."""

from django.urls import path

from api.views import threads

urlpatterns = [
    path("threads", threads.ThreadListCreateApi.as_view(), name="threads"),
    path("threads/<str:thread_id>", threads.ThreadDetailApi.as_view(), name="thread-detail"),
    path("threads/<str:thread_id>/events", threads.ThreadEventsApi.as_view(), name="thread-events"),
    # Before events/<event_id>, so "pop" and "batch" are not taken for event ids.
    path("threads/<str:thread_id>/events/pop", threads.ThreadEventPopApi.as_view(), name="thread-events-pop"),
    path("threads/<str:thread_id>/events/batch", threads.ThreadEventBatchApi.as_view(), name="thread-events-batch"),
    path("threads/<str:thread_id>/events/<str:event_id>", threads.ThreadEventDetailApi.as_view(),
         name="thread-event-detail"),
    path("threads/<str:thread_id>/summaries", threads.ThreadSummariesApi.as_view(), name="thread-summaries"),
    path("threads/<str:thread_id>/summarize", threads.ThreadSummarizeApi.as_view(), name="thread-summarize"),
    path("threads/<str:thread_id>/summary", threads.ThreadSummaryApi.as_view(), name="thread-summary"),
    path("workflows/<str:workflow_id>/checkpoint", threads.CheckpointApi.as_view(), name="workflow-checkpoint"),
    path("workflows/<str:workflow_id>/tool-calls", threads.ToolCallCreateApi.as_view(), name="workflow-tool-calls"),
    path("workflows/<str:workflow_id>/tool-calls/<str:key>", threads.ToolCallDetailApi.as_view(),
         name="workflow-tool-call-detail"),
]
