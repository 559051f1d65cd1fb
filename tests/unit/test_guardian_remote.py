"""A job process's desk asks through the worker's guardian endpoint (real HTTP, 127.0.0.1)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.trust import guardian_remote
from agent.trust.desk import GuardianDesk
from agent.trust.guardian_http import GuardianServer, answer_question, list_questions
from agent.trust.guardian_remote import RemoteGuardianDesk


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[GuardianDesk, str]]:
    desk = GuardianDesk()
    server = GuardianServer(desk, token="t0ken")
    await server.start()
    yield desk, server.url
    await server.aclose()


async def test_a_remote_question_is_listed_and_its_answer_comes_back(
    endpoint: tuple[GuardianDesk, str],
) -> None:
    desk, url = endpoint
    remote = RemoteGuardianDesk(url, token="t0ken")
    q = remote.ask("call_1", "May we refund last month's charge?")
    waiting = asyncio.ensure_future(remote.wait(q.id, 30.0))
    for _ in range(100):
        listed = await list_questions(url, "t0ken")
        if listed:
            break
        await asyncio.sleep(0.02)
    assert [(x["id"], x["call_id"], x["question"]) for x in listed] == [
        (q.id, "call_1", "May we refund last month's charge?")
    ]
    await answer_question(url, q.id, "yes, refund it", "t0ken")
    assert await asyncio.wait_for(waiting, 10) == "yes, refund it"
    assert desk.get(q.id) is not None and desk.get(q.id).status == "answered"  # type: ignore[union-attr]


async def test_an_unanswered_remote_question_expires_on_the_endpoint(
    endpoint: tuple[GuardianDesk, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guardian_remote, "POLL_SECONDS", 0.2)
    desk, url = endpoint
    remote = RemoteGuardianDesk(url, token="t0ken")
    q = remote.ask("call_1", "Is the account holder there?")
    assert await remote.wait(q.id, 0.5) is None
    assert desk.get(q.id).status == "timed_out"  # type: ignore[union-attr]
    assert await list_questions(url, "t0ken") == []


async def test_the_end_of_a_call_cancels_its_remote_questions(
    endpoint: tuple[GuardianDesk, str],
) -> None:
    desk, url = endpoint
    remote = RemoteGuardianDesk(url, token="t0ken")
    q = remote.ask("call_9", "Anything?")
    waiting = asyncio.ensure_future(remote.wait(q.id, 30.0))
    for _ in range(100):
        if desk.get(q.id) is not None:
            break
        await asyncio.sleep(0.02)
    await remote.acancel_call("call_9")
    assert await asyncio.wait_for(waiting, 10) is None
    assert desk.get(q.id).status == "cancelled"  # type: ignore[union-attr]


async def test_an_unreachable_endpoint_is_a_question_nobody_answers() -> None:
    remote = RemoteGuardianDesk("http://127.0.0.1:9")
    q = remote.ask("call_1", "Hello?")
    assert await remote.wait(q.id, 5.0) is None


async def test_the_endpoint_rejects_bad_questions(endpoint: tuple[GuardianDesk, str]) -> None:
    from agent.trust.guardian_http import GuardianClientError, _request

    _, url = endpoint
    bad: list[Any] = [
        {"call_id": "", "question": "x"},
        {"call_id": "c", "question": " "},
        {"call_id": "c", "question": "x", "id": "nope"},
    ]
    for body in bad:
        with pytest.raises(GuardianClientError, match="HTTP 400"):
            await _request("POST", f"{url}/guardian/questions", "t0ken", body)
    with pytest.raises(GuardianClientError, match="HTTP 404"):
        await _request("POST", f"{url}/guardian/questions/q_000000000000/wait", "t0ken", {})


def test_the_worker_port_setting_is_checked() -> None:
    from agent.app.worker import guardian_port

    assert guardian_port({}) is None
    assert guardian_port({"CALLRT_GUARDIAN_PORT": "8089"}) == 8089
    with pytest.raises(ValueError, match="CALLRT_GUARDIAN_PORT"):
        guardian_port({"CALLRT_GUARDIAN_PORT": "http"})


async def test_a_held_call_resumes_with_an_answer_given_over_http(
    endpoint: tuple[GuardianDesk, str],
) -> None:
    """The worker's shape: the call's desk is remote, the guardian answers the endpoint."""
    from agent.app.call import ModelSet
    from agent.app.chat import ChatSession
    from agent.app.config import AgentConfig
    from agent.models.estimate_tts import EstimateTTS
    from agent.telephony.sim.io import TranscriptFeedSTT
    from tests.fakes.models import ScriptedLLM, user_turns

    def reply(ctx: Any) -> str:
        said = [m.text_content or "" for m in ctx.messages()]
        if any("answered: yes" in s for s in said):
            return "Good news, the refund is approved."
        if "refund" in " ".join(user_turns(ctx)):
            return "Let me check. [ASK_GUARDIAN:May we refund the cleaning?]"
        return "Hello, this is Sam."

    _, url = endpoint
    config = AgentConfig(guardian={"numbers": ["+15550100999"], "question_timeout": 30})
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=ScriptedLLM(reply),
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )
    chat = ChatSession(config, models, desk=RemoteGuardianDesk(url, token="t0ken"))
    await chat.start()
    await chat.send("Can I get a refund?")
    for _ in range(200):
        listed = await list_questions(url, "t0ken")
        if listed:
            break
        await asyncio.sleep(0.02)
    assert [x["question"] for x in listed] == ["May we refund the cleaning?"]
    await answer_question(url, listed[0]["id"], "yes", "t0ken")
    for _ in range(200):
        said = [m.text for m in chat.messages if m.kind == "agent_turn_completed"]
        if "Good news, the refund is approved." in said:
            break
        await asyncio.sleep(0.05)
    await chat.close()
    assert "Good news, the refund is approved." in said
