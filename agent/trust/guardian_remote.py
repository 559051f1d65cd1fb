"""A guardian desk in another process: questions go to a guardian HTTP endpoint.

livekit runs each job of a worker in its own process, but the guardian should
find every pending question at one address. The worker's main process serves
the one :class:`~agent.trust.guardian.GuardianDesk` over HTTP
(:mod:`agent.trust.guardian_http`); each job process uses a :class:`RemoteGuardianDesk`
pointed at it, with the same ``ask`` / ``wait`` / ``cancel_call`` as a local
desk. ``wait`` long-polls until the answer comes or its own deadline (on the
loop's clock) passes; then the question is expired on the server, so the
guardian no longer sees it as pending. An unreachable endpoint is a question
nobody answers: ``wait`` returns ``None`` and the call carries on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import quote

from agent.trust.desk import PendingQuestion, new_question_id
from agent.trust.guardian_http import GuardianClientError, _request

logger = logging.getLogger("agent.trust.guardian")

__all__ = ["RemoteGuardianDesk"]

#: one long poll's length; the server caps it at MAX_WAIT
POLL_SECONDS = 25.0


class RemoteGuardianDesk:
    """A desk whose questions live on the guardian endpoint at ``url``.

    Args:
        url: the endpoint's base URL, e.g. ``http://127.0.0.1:8089``.
        token: the bearer token the endpoint needs, if any.
    """

    def __init__(self, url: str, *, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._asked: dict[str, PendingQuestion] = {}
        self._posted: set[str] = set()

    def ask(self, call_id: str, question: str) -> PendingQuestion:
        """Name a question now; it reaches the endpoint when :meth:`wait` starts."""
        question = question.strip()
        if not question:
            raise ValueError("a guardian question cannot be empty")
        q = PendingQuestion(
            id=new_question_id(), call_id=call_id, question=question, asked_at=time.time()
        )
        self._asked[q.id] = q
        return q

    async def wait(self, question_id: str, timeout: float | None) -> str | None:  # noqa: ASYNC109
        """The guardian's answer, or ``None`` after ``timeout`` seconds (or if unreachable)."""
        q = self._asked.get(question_id)
        if q is None:
            raise KeyError(question_id)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        path = f"{self.url}/guardian/questions"
        try:
            if question_id not in self._posted:
                body = {"id": q.id, "call_id": q.call_id, "question": q.question}
                await _request("POST", path, self.token, body)
                self._posted.add(question_id)
            while True:
                left = POLL_SECONDS if deadline is None else deadline - loop.time()
                if left <= 0:
                    break
                poll = min(left, POLL_SECONDS)
                got = await _request(
                    "POST", f"{path}/{quote(q.id)}/wait", self.token, {"timeout": poll}
                )
                if isinstance(got, dict) and got.get("status") != "pending":
                    q.status, q.answer = got.get("status", "cancelled"), got.get("answer")
                    return q.answer
            await _request("POST", f"{path}/{quote(q.id)}/expire", self.token)
            q.status = "timed_out"
        except GuardianClientError:
            logger.warning(
                "guardian endpoint unreachable", extra={"call_id": q.call_id, "question_id": q.id}
            )
        return None

    def cancel_call(self, call_id: str) -> list[PendingQuestion]:
        """Forget the call's questions here (:meth:`acancel_call` closes them on the endpoint)."""
        mine = [q for q in self._asked.values() if q.call_id == call_id]
        for q in mine:
            self._asked.pop(q.id, None)
        return mine

    async def acancel_call(self, call_id: str) -> None:
        """Cancel the call's pending questions on the endpoint (the call ended)."""
        self.cancel_call(call_id)
        try:
            await _request("POST", f"{self.url}/guardian/calls/{quote(call_id)}/cancel", self.token)
        except GuardianClientError:
            logger.warning("guardian endpoint unreachable", extra={"call_id": call_id})

    def subscribe(self, callback: Any) -> Any:
        """Remote questions are seen on the endpoint, not here: nothing to notify."""
        return lambda: None
