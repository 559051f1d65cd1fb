"""Phone numbers in E.164 form: parsing what people type, masking what logs show.

:func:`parse_e164` accepts a ``+``, the country code and the subscriber number,
with the spaces, dashes, dots and parentheses people write between digit groups
("+1 (555) 123-4567"), and returns the canonical ``+<digits>``. It checks the
shape only (length, no leading zero in the country code), not whether a country
or number range exists.
"""

from __future__ import annotations

import re

__all__ = ["PhoneNumberError", "parse_e164", "mask_number"]

#: E.164 allows at most 15 digits; fewer than 8 is no real international number.
MAX_DIGITS = 15
MIN_DIGITS = 8

_SEPARATORS = re.compile(r"[\s\-.()]+")
_EXPECTED = (
    "expected an E.164 number like +15551234567 "
    f"(a '+', the country code, then up to {MAX_DIGITS} digits in all)"
)


class PhoneNumberError(ValueError):
    """Text that is not an E.164 phone number; the message is one line.

    Attributes:
        reason: what exactly is wrong ("no leading '+'", "16 digits"), for
            callers that want more than the one-line message.
    """

    def __init__(self, text: object, reason: str) -> None:
        shown = text if isinstance(text, str) else str(text)
        if len(shown) > 40:
            shown = shown[:37] + "..."
        super().__init__(f"{_EXPECTED}, got {shown!r}")
        self.reason = reason


def parse_e164(text: str) -> str:
    """Parse a phone number written in E.164 form.

    Args:
        text: the number, e.g. ``"+15551234567"`` or ``"+1 (555) 123-4567"``.

    Returns:
        The canonical form, ``"+"`` followed by the digits only.

    Raises:
        PhoneNumberError: no leading ``+``, a country code starting with 0,
            letters or other characters, or fewer than 8 / more than 15 digits.
    """
    if not isinstance(text, str):
        raise PhoneNumberError(text, "not a string")
    stripped = text.strip()
    if not stripped.startswith("+"):
        raise PhoneNumberError(text, "no leading '+'")
    digits = _SEPARATORS.sub("", stripped[1:])
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise PhoneNumberError(text, "characters other than digits and separators")
    if digits[0] == "0":
        raise PhoneNumberError(text, "a country code cannot start with 0")
    if len(digits) > MAX_DIGITS:
        raise PhoneNumberError(text, f"{len(digits)} digits, at most {MAX_DIGITS} allowed")
    if len(digits) < MIN_DIGITS:
        raise PhoneNumberError(text, f"{len(digits)} digits, at least {MIN_DIGITS} expected")
    return "+" + digits


def mask_number(number: str) -> str:
    """Mask a phone number for logs: ``"+15551234567"`` becomes ``"+1********67"``.

    Keeps the ``+`` with the first digit (the start of the country code) and the
    last two digits. Text that is not a valid number is masked entirely, so a
    mistyped number never reaches a log either.

    Args:
        number: the number, in any form :func:`parse_e164` accepts.

    Returns:
        The masked number, or ``"***"`` when ``number`` does not parse.
    """
    try:
        canonical = parse_e164(number)
    except PhoneNumberError:
        return "***"
    return canonical[:2] + "*" * (len(canonical) - 4) + canonical[-2:]
