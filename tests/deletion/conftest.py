from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fast_retries(settings):
    # Backoff between step attempts: 10 ms, 20 ms ... so the retry tests stay fast.
    settings.ENGRAM_DELETION_RETRY_BASE_SECONDS = 0.01
    settings.ENGRAM_DELETION_STEP_ATTEMPTS = 3
