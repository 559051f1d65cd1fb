"""A small HTTP API over the :class:`~agent.trust.guardian.GuardianDesk`, and a client for it.

Routes (JSON in and out; errors are ``{"error": "<one line>"}``):

* ``GET /guardian/questions``: the pending questions;
* ``GET /guardian/questions/{id}``: one question, open or closed;
* ``POST /guardian/questions/{id}/answer`` with ``{"answer": "..."}``;
* ``GET /healthz``: ``{"ok": true}``, never behind the token.

With a token every other request needs ``Authorization: Bearer <token>``.
The server binds to 127.0.0.1 by default; put TLS in front of it before
exposing it anywhere else.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

from agent.trust.desk import GuardianDesk, PendingQuestion, QuestionClosed, UnknownQuestion

logger = logging.getLogger("agent.trust.guardian_http")

__all__ = [
    "guardian_app",
    "GuardianServer",
    "GuardianClientError",
    "list_questions",
    "answer_question",
]

_MAX_BODY = 64 * 1024
#: Seconds a client call may take in all.
CLIENT_TIMEOUT = 10.0


def _summary(q: PendingQuestion) -> dict[str, Any]:
    return {
        "id": q.id,
        "call_id": q.call_id,
        "question": q.question,
        "asked_at": q.asked_at,
        "status": q.status,
    }


def _detail(q: PendingQuestion) -> dict[str, Any]:
    return {**_summary(q), "answer": q.answer, "answered_at": q.answered_at}


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


MAX_WAIT = 55.0


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def guardian_app(desk: GuardianDesk, *, token: str | None = None) -> web.Application:
    """Build the guardian HTTP application.

    Args:
        desk: the desk whose questions are listed and answered.
        token: when set, every route but ``/healthz`` needs
            ``Authorization: Bearer <token>``.

    Returns:
        The application, ready for an :class:`aiohttp.web.AppRunner`.
    """
    expected = f"Bearer {token}".encode() if token else None

    @web.middleware
    async def auth(request: web.Request, handler: Any) -> web.StreamResponse:
        if expected is not None and request.path != "/healthz":
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                logger.warning("guardian API request without a valid token")
                response = _error(401, "missing or wrong 'Authorization: Bearer <token>' header")
                response.headers["WWW-Authenticate"] = "Bearer"
                return response
        result: web.StreamResponse = await handler(request)
        return result

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def list_pending(request: web.Request) -> web.Response:
        return web.json_response({"questions": [_summary(q) for q in desk.pending()]})

    async def get_question(request: web.Request) -> web.Response:
        qid = request.match_info["id"]
        q = desk.get(qid)
        if q is None:
            return _error(404, str(UnknownQuestion(qid)))
        return web.json_response(_detail(q))

    async def post_answer(request: web.Request) -> web.Response:
        qid = request.match_info["id"]
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, 'request body must be JSON like {"answer": "..."}')
        answer = body.get("answer") if isinstance(body, dict) else None
        if not isinstance(answer, str) or not answer.strip():
            return _error(400, "'answer' must be a non-empty string in the JSON body")
        try:
            q = desk.answer(qid, answer)
        except UnknownQuestion as e:
            return _error(404, str(e))
        except QuestionClosed as e:
            return _error(409, str(e))
        return web.json_response(_detail(q))

    # -- for remote desks (a worker's job processes ask through these) ------------

    async def post_question(request: web.Request) -> web.Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            return _error(400, 'request body must be JSON like {"call_id": ..., "question": ...}')
        call_id, question, qid = body.get("call_id"), body.get("question"), body.get("id")
        if not isinstance(call_id, str) or not call_id:
            return _error(400, "'call_id' must be a non-empty string in the JSON body")
        if not isinstance(question, str) or not question.strip():
            return _error(400, "'question' must be a non-empty string in the JSON body")
        if qid is not None and not isinstance(qid, str):
            return _error(400, "'id' must be a string")
        try:
            q = desk.ask(call_id, question, question_id=qid)
        except ValueError as e:
            return _error(409 if "exists" in str(e) else 400, str(e))
        return web.json_response(_detail(q), status=201)

    async def post_wait(request: web.Request) -> web.Response:
        qid = request.match_info["id"]
        body = await _json_body(request)
        seconds = body.get("timeout", 25) if isinstance(body, dict) else None
        if not isinstance(seconds, int | float) or not 0 <= seconds <= MAX_WAIT:
            return _error(400, f"'timeout' must be a number of seconds from 0 to {MAX_WAIT}")
        if desk.get(qid) is None:
            return _error(404, str(UnknownQuestion(qid)))
        try:
            # a long poll: the question stays pending when the poll times out
            await asyncio.wait_for(desk.wait(qid, None), seconds)
        except TimeoutError:
            pass
        q = desk.get(qid)
        return web.json_response(_detail(q)) if q else _error(404, str(UnknownQuestion(qid)))

    async def post_expire(request: web.Request) -> web.Response:
        qid = request.match_info["id"]
        try:
            return web.json_response(_detail(desk.expire(qid)))
        except UnknownQuestion as e:
            return _error(404, str(e))

    async def post_cancel_call(request: web.Request) -> web.Response:
        cancelled = desk.cancel_call(request.match_info["call_id"])
        return web.json_response({"cancelled": [q.id for q in cancelled]})

    app = web.Application(middlewares=[auth], client_max_size=_MAX_BODY)
    app.router.add_post("/guardian/questions", post_question)
    app.router.add_post("/guardian/questions/{id}/wait", post_wait)
    app.router.add_post("/guardian/questions/{id}/expire", post_expire)
    app.router.add_post("/guardian/calls/{call_id}/cancel", post_cancel_call)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/guardian/questions", list_pending)
    app.router.add_get("/guardian/questions/{id}", get_question)
    app.router.add_post("/guardian/questions/{id}/answer", post_answer)
    return app


class GuardianServer:
    """Serves :func:`guardian_app` on a TCP port.

    Args:
        desk: the desk to serve.
        token: the bearer token every request but ``/healthz`` needs, or ``None``.
    """

    def __init__(self, desk: GuardianDesk, *, token: str | None = None) -> None:
        self._app = guardian_app(desk, token=token)
        self._runner: web.AppRunner | None = None
        self._url: str | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Start listening; port 0 picks a free port.

        Returns:
            The bound port.
        """
        if self._runner is not None:
            raise RuntimeError("GuardianServer already started")
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = runner.addresses[0][1]
        self._url = f"http://{f'[{host}]' if ':' in host else host}:{bound}"
        logger.info("guardian API listening", extra={"host": host, "port": bound})
        return int(bound)

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8765``; only once started."""
        if self._url is None:
            raise RuntimeError("GuardianServer is not started")
        return self._url

    async def aclose(self) -> None:
        """Stop listening; safe to call twice."""
        runner, self._runner, self._url = self._runner, None, None
        if runner is not None:
            await runner.cleanup()


class GuardianClientError(Exception):
    """A guardian API call failed; the message names the URL and the problem.

    Attributes:
        status: the HTTP status, or ``None`` when there was no response.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


async def _request(method: str, url: str, token: str | None, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)) as session,
            session.request(method, url, json=body, headers=headers) as resp,
        ):
            text = await resp.text()
            status = resp.status
    except aiohttp.ClientConnectorError as e:
        err = e.os_error
        # a refused connect's strerror is "Connect call failed (...)"; DNS errors have errno < 0
        errno = err.errno or 0
        reason = os.strerror(errno) if errno > 0 else err.strerror
        reason = reason or type(err).__name__
        raise GuardianClientError(f"{method} {url}: cannot connect ({reason})") from None
    except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError):
        raise GuardianClientError(f"{method} {url}: not a valid http(s) URL") from None
    except TimeoutError:
        raise GuardianClientError(f"{method} {url}: no answer within {CLIENT_TIMEOUT:g}s") from None
    except aiohttp.ClientError as e:
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise GuardianClientError(f"{method} {url}: {problem}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if status >= 400:
        detail = data.get("error") if isinstance(data, dict) else None
        detail = detail or " ".join(text.split())[:200] or "no details"
        raise GuardianClientError(f"{method} {url}: HTTP {status}: {detail}", status)
    if data is None:
        raise GuardianClientError(f"{method} {url}: HTTP {status} but the body is not JSON", status)
    return data


async def list_questions(url: str, token: str | None = None) -> list[dict[str, Any]]:
    """The pending questions of the guardian API at ``url``.

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:8765``.
        token: the bearer token, if the server needs one.

    Raises:
        GuardianClientError: the server could not be reached or refused.
    """
    endpoint = f"{url.rstrip('/')}/guardian/questions"
    data = await _request("GET", endpoint, token)
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise GuardianClientError(f"GET {endpoint}: the response has no 'questions' list")
    return list(data["questions"])


async def answer_question(
    url: str, question_id: str, answer: str, token: str | None = None
) -> dict[str, Any]:
    """Answer a question through the guardian API at ``url``.

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:8765``.
        question_id: the question's id (``q_...``).
        answer: the answer text.
        token: the bearer token, if the server needs one.

    Returns:
        The answered question.

    Raises:
        GuardianClientError: unreachable, unauthorised, unknown (404) or
            already closed (409) question, or an empty answer (400).
    """
    endpoint = f"{url.rstrip('/')}/guardian/questions/{quote(question_id, safe='')}/answer"
    data = await _request("POST", endpoint, token, {"answer": answer})
    if not isinstance(data, dict):
        raise GuardianClientError(f"POST {endpoint}: the response is not a JSON object")
    return data
