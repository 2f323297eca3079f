"""engram-mcp driven by the official MCP SDK's own client over stdio and over streamable HTTP: the server is
the installed console script in a subprocess, configured like a host would (flags / environment), talking to
the live Engram server over HTTP. Over HTTP, a request without the configured bearer token gets 401."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memory.identity.access import reviewer_of
from tests.clients.conftest import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("run_tasks_inline")]
ENGRAM_MCP = str(Path(sys.executable).parent / "engram-mcp")


def _with_session(server: Any, subject: str, body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    params = StdioServerParameters(command=ENGRAM_MCP, args=["--url", server.url, "--subject-id", subject],
                                   env={"ENGRAM_API_KEY": server.key})

    async def run() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return run_async(run())


async def _call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    return result


def test_an_mcp_host_lists_remembers_searches_and_forgets(server: Any) -> None:
    from memory.identity.services import user_create
    from procedures.services import procedure_publish

    reviewer = user_create(tenant=server.tenant, username="rita", password="pw-rita-123", reviewer=True)
    procedure_publish(tenant=server.tenant, name="refunds", body="Refund up to 50 EUR at once.\n",
                      reviewer=reviewer_of(reviewer),
                      change_summary="First")

    async def host(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"remember", "propose_memory", "search_memory", "get_fact", "list_memories",
                              "correct_memory", "forget_memory", "get_procedure", "propose_procedure_change"}
        assert all(t.description and len(t.description) > 40 for t in tools.values())
        assert tools["forget_memory"].annotations.destructive_hint is True
        assert tools["search_memory"].annotations.read_only_hint is True
        assert tools["remember"].annotations.destructive_hint is False

        stored = (await _call(session, "remember", text="Prefers aisle seats", namespace="user/travel_preferences",
                              field="seat_preference", value="aisle")).structured_content
        assert (stored["status"], stored["source"]["type"]) == ("active", "explicit_user_statement")

        found = (await _call(session, "search_memory", query="Which seat does the user want?")).structured_content
        packet = found["packets"][0]
        assert (packet["memory_id"], packet["fact"], packet["content_role"]) == (
            stored["memory_id"], "Prefers aisle seats", "data")
        assert packet["namespace"] == ["user", "travel_preferences"] and packet["source_date"]

        nothing = (await _call(session, "search_memory", query="favourite football club",
                               namespaces=["user/sports"])).structured_content
        assert nothing["packets"] == [] and "usr_owner" in nothing["message"] and "user/sports" in nothing["message"]

        fact = (await _call(session, "get_fact", namespace="user/travel_preferences",
                            field="seat_preference")).structured_content
        assert (fact["found"], fact["fact"]["value"]) == (True, "aisle")
        corrected = (await _call(session, "correct_memory", memory_id=stored["memory_id"], value="window",
                                 text="Prefers window seats")).structured_content
        assert corrected["corrects"] == stored["memory_id"]
        listed = (await _call(session, "list_memories", namespace="user")).structured_content
        assert [m["fact"]["value"] for m in listed["results"]] == ["window"]

        proposed = (await _call(session, "propose_memory", text="Might like jazz", namespace="user/inferred",
                                field="music", value="jazz", evidence="I went to a jazz bar")).structured_content
        assert proposed["status"] == "pending"
        refused = await _call(session, "remember", text="Might like jazz", namespace="user/inferred", field="music")
        assert refused.is_error and "class_not_allowed" in refused.content[0].text

        job = (await _call(session, "forget_memory", memory_id=corrected["memory_id"])).structured_content
        assert job["deletion_id"].startswith("del_") and job["status"] in ("pending", "running", "completed")
        gone = (await _call(session, "get_fact", namespace="user/travel_preferences",
                            field="seat_preference")).structured_content
        assert gone["found"] is False

        procedure = (await _call(session, "get_procedure", name="refunds")).structured_content
        assert (procedure["version"], procedure["body"]) == (1, "Refund up to 50 EUR at once.\n")
        change = (await _call(session, "propose_procedure_change", name="refunds",
                              body="Refund up to 80 EUR at once.\n", rationale="New policy")).structured_content
        assert change["status"] == "pending"

    _with_session(server, "usr_owner", host)


def test_another_principal_finds_nothing_through_mcp(server: Any) -> None:
    memory = server.client("usr_owner").remember("Allergic to penicillin", namespace="user/profile",
                                                 field="allergy", value="penicillin")

    async def outsider(session: ClientSession) -> None:
        found = (await _call(session, "search_memory", query="penicillin allergy")).structured_content
        assert found["packets"] == [] and "usr_outsider" in found["message"]
        assert (await _call(session, "get_fact", namespace="user/profile",
                            field="allergy")).structured_content["found"] is False
        refused = await _call(session, "forget_memory", memory_id=memory.memory_id)
        assert refused.is_error and "not_found" in refused.content[0].text

    _with_session(server, "usr_outsider", outsider)
    assert server.client("usr_owner").get(memory.memory_id).status == "active"


TOKEN = "mcp-test-token-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _http_server(server: Any, *extra: str, token: str | None = TOKEN) -> Iterator[str]:
    """engram-mcp over streamable HTTP in a subprocess; yields its /mcp URL once it listens."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_MCP_TOKEN"}
    if token is not None:
        env["ENGRAM_MCP_TOKEN"] = token
    process = subprocess.Popen([ENGRAM_MCP, "--transport", "streamable-http", "--port", str(port), "--url", server.url,
                                "--api-key", server.key, "--subject-id", "usr_owner", *extra],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _http_host(url: str, headers: dict[str, str], statuses: list[int] | None = None) -> tuple[set[str], Any]:
    """The SDK's client: initialize, list the tools, remember one fact; ``statuses`` collects the HTTP statuses."""
    http = create_mcp_http_client(headers=headers)

    async def record(response: Any) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    http.event_hooks["response"] = [record]
    async with (http, streamable_http_client(url, http_client=http) as (read, write, *_),
                ClientSession(read, write) as session):
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        stored = await _call(session, "remember", text="Plays the cello", namespace="user/hobbies",
                             field="instrument", value="cello")
        return names, stored.structured_content


def test_the_streamable_http_transport_serves_the_same_tools_to_a_client_with_the_token(server: Any) -> None:
    with _http_server(server) as url:
        names, stored = run_async(_http_host(url, {"Authorization": f"Bearer {TOKEN}"}))
    assert "search_memory" in names and stored["fact"]["value"] == "cello"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token-0123456789abcdef"},
                                     {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": TOKEN}])
def test_a_client_without_the_right_token_gets_401_and_nothing_happens(server: Any, headers: dict[str, str]) -> None:
    with _http_server(server) as url:
        statuses: list[int] = []
        with pytest.raises(BaseExceptionGroup, match="unhandled errors"):  # the SDK client's task group fails
            run_async(_http_host(url, headers, statuses))
        assert statuses == [401]  # its first request, initialize, is refused; nothing else is tried

        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "probe", "version": "1"}}}
        answer = httpx.post(url, json=initialize, headers={**headers, "Accept": "application/json, text/event-stream"})
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Bearer ")
        assert answer.json()["error"] == "invalid_token"
    assert server.client("usr_owner").list(namespace="user/hobbies").results == []


@pytest.mark.parametrize(("token", "reason"), [(None, "no token is configured"), ("", "no token is configured"),
                                               ("short", "shorter than 16")])
def test_over_http_without_a_token_it_refuses_to_start_and_says_how_to_set_one(server: Any, token: str | None,
                                                                               reason: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ENGRAM_MCP_TOKEN"}
    if token is not None:
        env["ENGRAM_MCP_TOKEN"] = token
    done = subprocess.run([ENGRAM_MCP, "--transport", "streamable-http", "--port", str(_free_port()),
                           "--url", server.url, "--api-key", server.key, "--subject-id", "usr_owner"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert reason in done.stderr and "ENGRAM_MCP_TOKEN" in done.stderr and "Authorization: Bearer" in done.stderr


def test_the_token_can_come_from_a_flag_or_a_file(server: Any, tmp_path: Path) -> None:
    with _http_server(server, "--token", TOKEN, token=None) as url:
        names, _ = run_async(_http_host(url, {"Authorization": f"Bearer {TOKEN}"}))
        assert "remember" in names
    token_file = tmp_path / "mcp-token"
    token_file.write_text(TOKEN + "\n")
    with _http_server(server, "--token-file", str(token_file), token=None) as url:
        names, _ = run_async(_http_host(url, {"Authorization": f"Bearer {TOKEN}"}))
        assert "remember" in names
