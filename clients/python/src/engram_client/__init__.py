"""engram_client: the Python client of Engram, governed long-term memory for AI agents.

- :class:`Engram` / :class:`AsyncEngram`: the REST API as domain methods (remember, propose, search,
  forget, threads, documents, procedures ...), typed results, safe retries.
- ``engram_client.langgraph.EngramStore``: a LangGraph ``BaseStore`` (extra ``[langgraph]``).
- ``engram_client.openai_agents.EngramSession``: an OpenAI Agents SDK ``Session`` (extra ``[openai-agents]``).
- ``engram-mcp``: an MCP server for Claude Desktop, IDEs and other MCP hosts (extra ``[mcp]``).
"""

from engram_client.aio import AsyncEngram
from engram_client.client import Engram
from engram_client.errors import (
    AuthenticationFailed,
    Conflict,
    EngramError,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    PolicyRefused,
    PreconditionFailed,
    RateLimited,
    SecretDetected,
    ServerError,
    ServiceUnavailable,
    TransportError,
)
from engram_client.models import (
    Candidate,
    Checkpoint,
    DeletionJob,
    Document,
    EventPage,
    Memory,
    Packet,
    Page,
    Procedure,
    Proposal,
    SearchResult,
    Summary,
    Thread,
    ThreadCleared,
    ThreadEvent,
    ToolCall,
)

__version__ = "0.1.0"

__all__ = [
    "Engram", "AsyncEngram", "EngramError", "InvalidRequest", "AuthenticationFailed", "PermissionDenied", "NotFound",
    "Conflict", "PreconditionFailed", "PolicyRefused", "SecretDetected", "RateLimited", "ServiceUnavailable",
    "ServerError", "TransportError", "Memory", "Candidate", "Packet", "SearchResult", "Page", "DeletionJob", "Thread",
    "ThreadEvent", "EventPage", "ThreadCleared", "Summary", "Checkpoint", "ToolCall", "Document", "Procedure",
    "Proposal",
]
