"""The guardian: the person the agent works for, and how a call may act for them.

:class:`GuardianConfig` says who the guardian is and how a caller proves to be
them. The rest of the guardian lives beside it: :mod:`agent.trust.verifier`
decides, turn by turn and without I/O, whether the caller is the guardian;
:mod:`agent.trust.desk` holds the questions the agent asks the guardian while a
caller waits, answered out of band over :mod:`agent.trust.guardian_http` (or, from
a worker's job process, through :mod:`agent.trust.guardian_remote`).

Question text, answers, PINs and phone numbers never appear in a log message
body; logs carry ids and counts in ``extra`` fields only.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.telephony.phone import PhoneNumberError, parse_e164

__all__ = ["GuardianConfig", "split_words"]

_WORD = re.compile(r"[^\W_]+")


def split_words(text: str) -> list[tuple[int, int, bytes]]:
    """The words of ``text``: (start, end, casefolded UTF-8) for each, in order."""
    return [(m.start(), m.end(), m.group().casefold().encode()) for m in _WORD.finditer(text)]


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
        if passphrase is not None and len(split_words(passphrase)) < 2:
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
