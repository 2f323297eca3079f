"""The API's own state: rate-limit counters shared by every web process and node."""

from __future__ import annotations

from django.db import models


class ThrottleCounter(models.Model):
    """One row per rate-limited client (an agent key, or an address without one) and scope.

    Requests are counted in fixed windows of the rate's period; the previous window's count is kept so the
    limit can be applied to a sliding window. api/throttling.py updates a row with one atomic upsert."""

    key = models.CharField(max_length=200, primary_key=True)
    window_index = models.BigIntegerField(help_text="The current window: unix time // period.")
    count = models.IntegerField(default=0, help_text="Requests allowed in the current window.")
    previous = models.IntegerField(default=0, help_text="Requests allowed in the window before it.")
    allowed = models.BooleanField(default=True, help_text="Whether the last request was allowed.")

    class Meta:
        indexes = [models.Index(fields=["window_index"], name="api_throttle_window_idx")]

    def __str__(self) -> str:
        return self.key
