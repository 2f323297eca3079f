"""engram-mcp driven by the official MCP SDK's own client over stdio: the server is the installed console
script in a subprocess, configured like a host would (flags / environment), talking to the live Engram
server over HTTP."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

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


def test_the_streamable_http_transport_serves_the_same_tools(server: Any) -> None:
    import socket
    import subprocess
    import time

    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([ENGRAM_MCP, "--transport", "streamable-http", "--port", str(port), "--url", server.url,
                                "--api-key", server.key, "--subject-id", "usr_owner"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)

        async def host() -> Any:
            async with (streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, *_),
                        ClientSession(read, write) as session):
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                stored = await _call(session, "remember", text="Plays the cello", namespace="user/hobbies",
                                     field="instrument", value="cello")
                return names, stored.structured_content

        names, stored = run_async(host())
        assert "search_memory" in names and stored["fact"]["value"] == "cello"
    finally:
        process.terminate()
        process.wait(timeout=10)
