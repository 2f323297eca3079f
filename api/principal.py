"""The agent behind an API request (``request.user``), apart from how it was authenticated, so the
throttles and permissions can recognise it without importing the authentication."""

from __future__ import annotations

from memory.models import AgentKey
from memory.scope import Scope


class AgentPrincipal:
    """request.user for agent calls: the key, and the scope when a principal token came with it."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, key: AgentKey, scope: Scope | None) -> None:
        self.key = key
        self.scope = scope

    @property
    def actor(self) -> str:
        return f"agent_key:{self.key.pk}"
