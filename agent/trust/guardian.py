"""The guardian: who may act for the account holder, and the desk of questions for them.

A *guardian* is the person the agent works for. :class:`GuardianVerifier`
decides, turn by turn and without I/O, whether the caller is that person: by
caller id, and by a PIN or passphrase said (or a PIN keyed) during the call.
:class:`GuardianDesk` holds the questions the agent asks the guardian while a
caller waits (``[ASK_GUARDIAN]``); they are answered out of band, e.g. over
:mod:`agent.trust.guardian_http`.

Question text, answers, PINs and phone numbers never appear in a log message
body; logs carry ids and counts in ``extra`` fields only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import logging
import re
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.telephony.phone import PhoneNumberError, parse_e164

logger = logging.getLogger("agent.trust.guardian")

__all__ = [
    "GuardianConfig",
    "GuardianVerifier",
    "GuardianDesk",
    "PendingQuestion",
    "QuestionStatus",
    "DeskEvent",
    "UnknownQuestion",
    "QuestionClosed",
    "REDACTED",
]

REDACTED = "[verification code]"
QuestionStatus = Literal["pending", "answered", "timed_out", "cancelled"]
DeskEvent = Literal["asked", "answered", "timed_out", "cancelled"]
_Closed = Literal["answered", "timed_out", "cancelled"]


class GuardianConfig(BaseModel):
    """Who the guardian is and how the agent handles questions for them.

    The guardian is enabled when any of ``numbers``, ``pin`` or ``passphrase``
    is set. Errors never echo the input, so a mistyped PIN stays out of logs.
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    #: The guardian's phone numbers (E.164); a call from any other number never verifies.
    numbers: list[str] = []
    #: 4-10 digits the caller says or keys; quote it in YAML to keep leading zeros.
    pin: str | None = None
    #: Two or more words the caller says; case and punctuation do not matter.
    passphrase: str | None = None
    #: How long a caller waits for the guardian's answer, in seconds.
    question_timeout: float = Field(default=60.0, gt=0.0, le=3600.0)
    hold_message: str = Field(
        default="One moment please, I'm checking on that for you.", min_length=1
    )
    no_answer_instructions: str = Field(
        default=(
            "You could not get an answer to the caller's question right now. Tell the "
            "caller so in one short sentence and offer to follow up once you know."
        ),
        min_length=1,
    )
    #: What the agent is told when the answer arrives; must contain ``{answer}``.
    answer_instructions: str = (
        "The person you checked with answered: {answer}. "
        "Tell the caller in one or two short sentences."
    )

    @field_validator("numbers")
    @classmethod
    def _canonical_numbers(cls, numbers: list[str]) -> list[str]:
        out: list[str] = []
        for i, number in enumerate(numbers):
            try:
                canonical = parse_e164(number)
            except PhoneNumberError as e:
                raise ValueError(f"numbers[{i}]: {e}") from None
            if canonical not in out:
                out.append(canonical)
        return out

    @field_validator("pin", mode="before")
    @classmethod
    def _pin_digits(cls, pin: Any) -> Any:
        if pin is not None and not (isinstance(pin, str) and re.fullmatch(r"[0-9]{4,10}", pin)):
            raise ValueError("pin must be 4-10 digits in quotes, like '0420' (0-9 only)")
        return pin

    @field_validator("passphrase")
    @classmethod
    def _passphrase_words(cls, passphrase: str | None) -> str | None:
        if passphrase is not None and len(_words(passphrase)) < 2:
            raise ValueError("passphrase must be at least 2 words")
        return passphrase

    @field_validator("answer_instructions")
    @classmethod
    def _answer_placeholder(cls, text: str) -> str:
        try:
            ok = "{answer}" in text and text.format(answer="") is not None
        except (KeyError, IndexError, ValueError):
            ok = False
        if not ok:
            raise ValueError("must contain {answer} and no other {fields} ('{{' for a '{')")
        return text

    @property
    def enabled(self) -> bool:
        """Whether a guardian is configured at all."""
        return bool(self.numbers or self.pin or self.passphrase)

    def format_answer(self, answer: str) -> str:
        """The instructions for the agent once ``answer`` has arrived."""
        return self.answer_instructions.format(answer=answer)


# -- verification (pure) -----------------------------------------------------------------

_DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
_ZERO_INTERJECTIONS = frozenset({"oh", "o"})
# Words that do not make a turn "conversation" rather than a PIN attempt.
_FILLER = frozenset(
    "a and code digits er erm here i is it its my no number ok okay passcode password pin "
    "please s security so sure that the think uh um verification well yeah yes".split()
)
_TOKEN = re.compile(r"[0-9]+|[^\W\d_]+")
_WORD = re.compile(r"[^\W_]+")
# What may sit between the digit groups of one spoken number.
_RUN_GAP = re.compile(r"[\s,.\-\u2010-\u2015]*")
# A turn with more separate numbers than this is not checked at all, so one long
# turn of guesses ("0000, 0001, 0002, ...") cannot sidestep the attempt limit.
_MAX_NUMBERS_PER_TURN = 3


def _words(text: str) -> list[tuple[int, int, bytes]]:
    return [(m.start(), m.end(), m.group().casefold().encode()) for m in _WORD.finditer(text)]


class _Number(NamedTuple):
    """One spoken or written number: its span and the digit readings it allows."""

    start: int
    end: int
    digits: str
    readings: tuple[str, ...]


def _scan(text: str) -> tuple[list[_Number], int]:
    """The numbers in ``text``, and how many other words it has besides fillers."""
    numbers: list[_Number] = []
    others = 0
    tokens: list[tuple[int, int, str, bool]] = []

    def flush() -> None:
        if tokens:
            digits = "".join(t[2] for t in tokens)
            lead = 0
            while lead < len(tokens) and tokens[lead][3]:
                lead += 1
            rest = "".join(t[2] for t in tokens[lead:])
            readings = (digits, rest) if 0 < lead < len(tokens) else (digits,)
            numbers.append(_Number(tokens[0][0], tokens[-1][1], digits, readings))
            tokens.clear()

    for m in _TOKEN.finditer(text):
        raw = m.group()
        word = raw.casefold()
        value = raw if raw[0] in "0123456789" else _DIGIT_WORDS.get(word)
        if value is None:
            flush()
            others += word not in _FILLER
            continue
        if tokens and _RUN_GAP.fullmatch(text, tokens[-1][1], m.start()) is None:
            flush()
        tokens.append((m.start(), m.end(), value, word in _ZERO_INTERJECTIONS))
    flush()
    return numbers, others


class GuardianVerifier:
    """Decides whether the caller on one call is the guardian.

    Rules, in order:

    * no guardian configured: never verified;
    * ``numbers`` configured and the caller's number is not one of them (or is
      unknown): never verified, whatever PIN or passphrase is said;
    * the number matches and neither ``pin`` nor ``passphrase`` is configured:
      verified from the start. Caller id can be spoofed; configure a PIN or
      passphrase where that matters;
    * otherwise the caller must say the PIN (as digits or digit words, "oh" or
      "zero" for 0) or the passphrase, or key the PIN (optionally ending with #).

    After 3 wrong attempts (a DTMF entry, or a turn that is mainly a number of
    4+ digits) the verifier locks and never verifies on this call. Secrets are
    compared with :func:`hmac.compare_digest`.

    Args:
        config: the guardian configuration.
        caller_number: the caller's number, ``None`` when withheld.
    """

    MAX_ATTEMPTS = 3

    def __init__(self, config: GuardianConfig, caller_number: str | None) -> None:
        self._pin = config.pin.encode() if config.pin else None
        self._phrase = [w for _, _, w in _words(config.passphrase)] if config.passphrase else []
        try:
            caller = parse_e164(caller_number) if caller_number else None
        except PhoneNumberError:
            caller = None
        self._allowed = config.enabled and (not config.numbers or caller in config.numbers)
        self._verified = False
        #: How the caller was verified: "caller_id", "pin", "dtmf" or "passphrase".
        self.method: str | None = None
        self.failed_attempts = 0
        if self._allowed and self._pin is None and not self._phrase:
            self._verify("caller_id")

    @property
    def state(self) -> Literal["verified", "unverified"]:
        """``"verified"`` once the caller is known to be the guardian."""
        return "verified" if self._verified else "unverified"

    @property
    def locked(self) -> bool:
        """Whether too many wrong attempts were made; then nothing verifies any more."""
        return self.failed_attempts >= self.MAX_ATTEMPTS

    @property
    def can_verify(self) -> bool:
        """Whether saying or keying a secret could still verify this caller."""
        return self._allowed and not self._verified and not self.locked

    def check_turn(self, text: str) -> bool:
        """Check a transcribed caller turn for the PIN or passphrase; True once verified."""
        if not self.can_verify:
            return self._verified
        words = _words(text)
        if self._phrase and any(self._phrase_at(words, i) for i in range(len(words))):
            self._verify("passphrase")
            return True
        if self._pin is None:
            return False
        numbers, others = _scan(text)
        long_numbers = [n for n in numbers if len(n.digits) >= 4]
        if len(long_numbers) <= _MAX_NUMBERS_PER_TURN and any(
            self._is_pin(r) for n in numbers for r in n.readings
        ):
            self._verify("pin")
            return True
        if long_numbers and (others <= 1 or len(long_numbers) > _MAX_NUMBERS_PER_TURN):
            self._failed()
        return False

    def check_dtmf(self, digits: str) -> bool:
        """Check keyed digits (optionally ending with ``#``) against the PIN; True once verified."""
        if not self.can_verify or self._pin is None:
            return self._verified
        entry = digits.strip().removesuffix("#")
        if not entry:
            return False
        if self._is_pin(entry):
            self._verify("dtmf")
            return True
        self._failed()
        return False

    def redact(self, text: str) -> str:
        """Replace the PIN and the passphrase in ``text`` with ``[verification code]``.

        Every number whose digits contain the PIN is replaced whole, in any form
        :meth:`check_turn` accepts; other text is left as it was.
        """
        spans: list[tuple[int, int]] = []
        if self._pin is not None:
            pin = self._pin.decode()
            spans += [(n.start, n.end) for n in _scan(text)[0] if pin in n.digits]
        if self._phrase:
            words = _words(text)
            n = len(self._phrase)
            spans += [
                (words[i][0], words[i + n - 1][1])
                for i in range(len(words))
                if self._phrase_at(words, i)
            ]
        out, pos = [], 0
        for start, end in sorted(spans):
            if start >= pos:
                out += [text[pos:start], REDACTED]
            pos = max(pos, end)
        return "".join(out) + text[pos:]

    def _phrase_at(self, words: list[tuple[int, int, bytes]], i: int) -> bool:
        window = words[i : i + len(self._phrase)]
        return len(window) == len(self._phrase) and hmac.compare_digest(
            b" ".join(w for _, _, w in window), b" ".join(self._phrase)
        )

    def _is_pin(self, digits: str) -> bool:
        return self._pin is not None and hmac.compare_digest(digits.encode(), self._pin)

    def _verify(self, method: str) -> None:
        self._verified = True
        self.method = method
        logger.info("guardian verified", extra={"method": method})

    def _failed(self) -> None:
        self.failed_attempts += 1
        if self.locked:
            logger.warning("guardian verification locked", extra={"attempts": self.failed_attempts})


# -- the pending-question desk -----------------------------------------------------------


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
