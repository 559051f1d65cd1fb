"""The desk of questions for the guardian, and the calls waiting for their answers.

:class:`GuardianDesk` holds the questions the agent asks the guardian while a
caller waits (``[ASK_GUARDIAN]``); they are answered out of band, e.g. over
:mod:`agent.trust.guardian_http`. Question text and answers never appear in a log
message body; logs carry ids and counts in ``extra`` fields only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

logger = logging.getLogger("agent.trust.desk")

__all__ = [
    "DeskEvent",
    "GuardianDesk",
    "PendingQuestion",
    "QuestionClosed",
    "QuestionStatus",
    "UnknownQuestion",
    "new_question_id",
]

QuestionStatus = Literal["pending", "answered", "timed_out", "cancelled"]
DeskEvent = Literal["asked", "answered", "timed_out", "cancelled"]
_Closed = Literal["answered", "timed_out", "cancelled"]


def new_question_id() -> str:
    """A fresh question id: ``q_`` and 12 hex digits."""
    return "q_" + secrets.token_hex(6)


class UnknownQuestion(LookupError):
    """No question with that id (never asked, or long closed and forgotten)."""

    def __init__(self, question_id: str) -> None:
        super().__init__(f"no guardian question with id {question_id!r}")
        self.question_id = question_id


class QuestionClosed(LookupError):
    """The question was already answered, timed out or cancelled."""

    def __init__(self, question_id: str, status: QuestionStatus) -> None:
        super().__init__(f"guardian question {question_id!r} is already {status.replace('_', ' ')}")
        self.question_id = question_id
        self.status = status


@dataclass
class PendingQuestion:
    """One question for the guardian, asked on behalf of a call."""

    id: str
    call_id: str
    question: str
    asked_at: float
    status: QuestionStatus = "pending"
    answer: str | None = None
    answered_at: float | None = None


class GuardianDesk:
    """The questions waiting for the guardian, and the calls waiting for answers.

    Used from one event loop; :meth:`answer_threadsafe` lets another thread
    answer. Subscribers are called synchronously with ``(event, question)``; a
    subscriber that raises is logged and does not stop the others.

    Args:
        max_closed: how many closed questions are remembered for :meth:`get`.
    """

    def __init__(self, *, max_closed: int = 1000) -> None:
        self._questions: dict[str, PendingQuestion] = {}
        self._waiters: dict[str, set[asyncio.Future[str | None]]] = {}
        self._closed: deque[str] = deque()
        self._max_closed = max_closed
        self._subscribers: list[Callable[[DeskEvent, PendingQuestion], None]] = []

    def ask(
        self, call_id: str, question: str, *, question_id: str | None = None
    ) -> PendingQuestion:
        """Open a question for the guardian.

        Args:
            call_id: the call asking.
            question: the question.
            question_id: the id to use (a remote desk names its questions itself).

        Raises:
            ValueError: the question is empty, or the id is malformed or taken.
        """
        question = question.strip()
        if not question:
            raise ValueError("a guardian question cannot be empty")
        if question_id is not None:
            if not re.fullmatch(r"q_[0-9a-f]{12}", question_id):
                raise ValueError("'id' must look like q_ and 12 hex digits")
            if question_id in self._questions:
                raise ValueError(f"guardian question {question_id!r} already exists")
            qid = question_id
        else:
            qid = new_question_id()
            while qid in self._questions:
                qid = new_question_id()
        q = PendingQuestion(id=qid, call_id=call_id, question=question, asked_at=time.time())
        self._questions[qid] = q
        logger.info("guardian question asked", extra={"call_id": call_id, "question_id": qid})
        self._notify("asked", q)
        return q

    async def wait(self, question_id: str, timeout: float | None) -> str | None:  # noqa: ASYNC109
        """Wait for the answer, on the running loop's clock.

        Returns:
            The answer, or ``None`` when the question timed out (it is then
            ``"timed_out"``) or was cancelled. Cancelling the waiter leaves the
            question pending.

        Raises:
            UnknownQuestion: no such question.
        """
        q = self._require(question_id)
        if q.status != "pending":
            return q.answer
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(question_id, set())
        waiters.add(fut)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            if q.status == "pending":
                self._close(q, "timed_out")
            return q.answer
        finally:
            waiters.discard(fut)
            if not waiters and self._waiters.get(question_id) is waiters:
                del self._waiters[question_id]

    def answer(self, question_id: str, text: str) -> PendingQuestion:
        """Answer a pending question; its waiters get the answer.

        Raises:
            UnknownQuestion: no such question.
            QuestionClosed: it was already answered, timed out or cancelled.
            ValueError: the answer is empty.
        """
        q = self._require(question_id)
        if q.status != "pending":
            raise QuestionClosed(question_id, q.status)
        text = text.strip()
        if not text:
            raise ValueError("an answer cannot be empty")
        q.answer, q.answered_at = text, time.time()
        self._close(q, "answered")
        return q

    def answer_threadsafe(
        self,
        loop: asyncio.AbstractEventLoop,
        question_id: str,
        text: str,
        *,
        timeout: float | None = 10.0,
    ) -> PendingQuestion:
        """:meth:`answer` from another thread, run on ``loop``; blocks until done.

        Raises:
            RuntimeError: called on ``loop``'s own thread (use :meth:`answer`).
            TimeoutError: ``loop`` did not run the answer within ``timeout``.
        """
        try:
            same_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            raise RuntimeError("answer_threadsafe() on the desk's own loop; call answer()")

        result: concurrent.futures.Future[PendingQuestion] = concurrent.futures.Future()

        def answer() -> None:
            try:
                result.set_result(self.answer(question_id, text))
            except Exception as e:  # goes back to the calling thread
                result.set_exception(e)

        loop.call_soon_threadsafe(answer)
        return result.result(timeout)

    def expire(self, question_id: str) -> PendingQuestion:
        """Close a pending question as ``timed_out`` (its asker stopped waiting)."""
        q = self._require(question_id)
        if q.status == "pending":
            self._close(q, "timed_out")
        return q

    def pending(self) -> list[PendingQuestion]:
        """The open questions, oldest first."""
        return [q for q in self._questions.values() if q.status == "pending"]

    def get(self, question_id: str) -> PendingQuestion | None:
        """The question with that id, open or recently closed."""
        return self._questions.get(question_id)

    def cancel_call(self, call_id: str) -> list[PendingQuestion]:
        """Cancel the call's open questions (the call ended); their waiters get ``None``."""
        cancelled = [q for q in self.pending() if q.call_id == call_id]
        for q in cancelled:
            self._close(q, "cancelled")
        return cancelled

    def subscribe(
        self, callback: Callable[[DeskEvent, PendingQuestion], None]
    ) -> Callable[[], None]:
        """Call ``callback(event, question)`` on every change; returns the unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _require(self, question_id: str) -> PendingQuestion:
        q = self._questions.get(question_id)
        if q is None:
            raise UnknownQuestion(question_id)
        return q

    def _close(self, q: PendingQuestion, status: _Closed) -> None:
        q.status = status
        for fut in self._waiters.get(q.id, ()):
            if not fut.done():
                fut.set_result(q.answer)
        self._closed.append(q.id)
        while len(self._closed) > self._max_closed:
            self._questions.pop(self._closed.popleft(), None)
        logger.info(
            "guardian question closed",
            extra={"call_id": q.call_id, "question_id": q.id, "status": status},
        )
        self._notify(status, q)

    def _notify(self, event: DeskEvent, q: PendingQuestion) -> None:
        for callback in list(self._subscribers):
            try:
                callback(event, q)
            except Exception:
                logger.exception(
                    "guardian desk subscriber failed", extra={"event": event, "question_id": q.id}
                )
