"""Guardian HTTP API: a real server on 127.0.0.1, the client helpers and raw requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from agent.trust.desk import GuardianDesk
from agent.trust.guardian_http import (
    GuardianClientError,
    GuardianServer,
    answer_question,
    list_questions,
)

TOKEN = "s3cret-token"


@pytest.fixture
async def desk() -> GuardianDesk:
    return GuardianDesk()


@pytest.fixture
async def server(desk: GuardianDesk) -> AsyncIterator[GuardianServer]:
    srv = GuardianServer(desk)
    await srv.start()
    yield srv
    await srv.aclose()


@pytest.fixture
async def secured(desk: GuardianDesk) -> AsyncIterator[GuardianServer]:
    srv = GuardianServer(desk, token=TOKEN)
    await srv.start()
    yield srv
    await srv.aclose()


async def test_start_returns_the_bound_port_and_url(desk: GuardianDesk) -> None:
    srv = GuardianServer(desk)
    with pytest.raises(RuntimeError, match="not started"):
        _ = srv.url
    port = await srv.start("127.0.0.1", 0)
    try:
        assert port > 0
        assert srv.url == f"http://127.0.0.1:{port}"
    finally:
        await srv.aclose()
        await srv.aclose()


async def test_list_shows_pending_questions_only(
    server: GuardianServer, desk: GuardianDesk
) -> None:
    assert await list_questions(server.url) == []
    a = desk.ask("call_1", "Can I book Tuesday?")
    b = desk.ask("call_2", "Is the gate code 44?")
    desk.answer(b.id, "no")
    questions = await list_questions(server.url + "/")
    assert questions == [
        {
            "id": a.id,
            "call_id": "call_1",
            "question": "Can I book Tuesday?",
            "asked_at": a.asked_at,
            "status": "pending",
        }
    ]


async def test_answer_resumes_the_waiting_call(server: GuardianServer, desk: GuardianDesk) -> None:
    q = desk.ask("call_1", "Can I book Tuesday?")
    waiter = asyncio.create_task(desk.wait(q.id, timeout=5))
    await asyncio.sleep(0)
    answered = await answer_question(server.url, q.id, "  yes, after 2pm ")
    assert await waiter == "yes, after 2pm"
    assert answered["id"] == q.id
    assert answered["status"] == "answered"
    assert answered["answer"] == "yes, after 2pm"
    assert await list_questions(server.url) == []


async def test_get_one_question_and_404_for_unknown(
    server: GuardianServer, desk: GuardianDesk
) -> None:
    q = desk.ask("call_1", "Tuesday?")
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server.url}/guardian/questions/{q.id}") as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body["status"] == "pending"
        assert body["answer"] is None
        async with session.get(f"{server.url}/guardian/questions/q_nope") as resp:
            assert resp.status == 404
            assert "q_nope" in (await resp.json())["error"]
        async with session.get(f"{server.url}/healthz") as resp:
            assert (resp.status, await resp.json()) == (200, {"ok": True})


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("not json", "must be JSON"),
        ("[1, 2]", "'answer'"),
        ("{}", "'answer'"),
        ('{"answer": "   "}', "'answer'"),
        ('{"answer": 42}', "'answer'"),
        ('{"reply": "yes"}', "'answer'"),
    ],
)
async def test_bad_answer_bodies_are_400_naming_the_key(
    server: GuardianServer, desk: GuardianDesk, data: str, expected: str
) -> None:
    q = desk.ask("call_1", "Tuesday?")
    url = f"{server.url}/guardian/questions/{q.id}/answer"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=data, headers={"Content-Type": "application/json"}) as resp,
    ):
        assert resp.status == 400
        assert expected in (await resp.json())["error"]
    assert q.status == "pending"


async def test_client_errors_name_the_url_and_status(
    server: GuardianServer, desk: GuardianDesk
) -> None:
    with pytest.raises(GuardianClientError) as info:
        await answer_question(server.url, "q_nope", "yes")
    assert info.value.status == 404
    assert str(info.value) == (
        f"POST {server.url}/guardian/questions/q_nope/answer: HTTP 404: "
        "no guardian question with id 'q_nope'"
    )
    q = desk.ask("call_1", "Tuesday?")
    await answer_question(server.url, q.id, "yes")
    with pytest.raises(GuardianClientError, match="HTTP 409: .* is already answered") as info:
        await answer_question(server.url, q.id, "no")
    assert info.value.status == 409
    q2 = desk.ask("call_1", "Wednesday?")
    with pytest.raises(GuardianClientError, match="HTTP 400: 'answer'"):
        await answer_question(server.url, q2.id, " ")


async def test_token_is_required_except_for_healthz(
    secured: GuardianServer, desk: GuardianDesk
) -> None:
    q = desk.ask("call_1", "Tuesday?")
    with pytest.raises(GuardianClientError, match="HTTP 401") as info:
        await list_questions(secured.url)
    assert info.value.status == 401
    with pytest.raises(GuardianClientError, match="HTTP 401"):
        await list_questions(secured.url, token="wrong")
    with pytest.raises(GuardianClientError, match="HTTP 401"):
        await answer_question(secured.url, q.id, "yes")
    assert q.status == "pending"
    assert [x["id"] for x in await list_questions(secured.url, token=TOKEN)] == [q.id]
    assert (await answer_question(secured.url, q.id, "yes", token=TOKEN))["status"] == "answered"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{secured.url}/healthz") as resp:
            assert resp.status == 200
        async with session.get(
            f"{secured.url}/guardian/questions/{q.id}", headers={"Authorization": TOKEN}
        ) as resp:
            assert resp.status == 401
            assert resp.headers["WWW-Authenticate"] == "Bearer"


async def test_client_error_on_a_closed_port(desk: GuardianDesk) -> None:
    srv = GuardianServer(desk)
    await srv.start()
    url = srv.url
    await srv.aclose()
    with pytest.raises(GuardianClientError) as info:
        await list_questions(url)
    message = str(info.value)
    assert message.startswith(f"GET {url}/guardian/questions: cannot connect")
    assert "\n" not in message
    assert info.value.status is None
    with pytest.raises(GuardianClientError, match="cannot connect"):
        await answer_question(url, "q_1", "yes")
