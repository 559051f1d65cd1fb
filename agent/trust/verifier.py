"""Is the caller the guardian? Decided turn by turn, without I/O.

:class:`GuardianVerifier` checks the caller id, and a PIN or passphrase said (or a
PIN keyed) during the call, against :class:`~agent.trust.guardian.GuardianConfig`;
it redacts what was said in proof from the transcript (:data:`REDACTED`). PINs and
phone numbers never appear in a log message body.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import Literal, NamedTuple

from agent.telephony.phone import PhoneNumberError, parse_e164
from agent.trust.guardian import GuardianConfig, split_words

logger = logging.getLogger("agent.trust.verifier")

__all__ = ["REDACTED", "GuardianVerifier"]

REDACTED = "[verification code]"


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
# What may sit between the digit groups of one spoken number.
_RUN_GAP = re.compile(r"[\s,.\-\u2010-\u2015]*")
# A turn with more separate numbers than this is not checked at all, so one long
# turn of guesses ("0000, 0001, 0002, ...") cannot sidestep the attempt limit.
_MAX_NUMBERS_PER_TURN = 3


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
        phrase = config.passphrase
        self._phrase = [w for _, _, w in split_words(phrase)] if phrase else []
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
        words = split_words(text)
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
            words = split_words(text)
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
