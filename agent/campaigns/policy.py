"""The campaign scheduler's pure decision logic: windows, retries, DNC, pacing.

Nothing here reads a clock, sleeps or does I/O: every function takes ``now``
(a timezone-aware datetime for calling windows, monotonic seconds for the
pacer), so the dialer can drive it on a real or a simulated clock.

Calling windows are wall-clock times in the *callee's* time zones. A number
whose area spans several zones is called only when every one of them is inside
a window, so nobody is rung outside the hours, whichever zone they live in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from types import MappingProxyType
from typing import get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import phonenumbers
from phonenumbers import timezone as phone_timezone

from agent.core.messages import Disposition
from agent.telephony.phone import PhoneNumberError, parse_e164

__all__ = [
    "WEEKDAYS",
    "Window",
    "in_windows",
    "next_open",
    "OUTCOMES",
    "outcome_of",
    "DEFAULT_RETRY_AFTER",
    "Decision",
    "RetryPolicy",
    "DncList",
    "Pacer",
    "zones_for_number",
    "zone_exists",
    "parse_duration",
    "parse_days",
    "parse_clock",
]

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

#: what an attempt can end as: a call disposition, or a voicemail left, or the
#: dialer dying during the call
OUTCOMES: tuple[str, ...] = (*get_args(Disposition), "voicemail-left", "abandoned")

#: Seconds to wait before the next attempt after each outcome; None ends the contact.
DEFAULT_RETRY_AFTER: dict[str, float | None] = {
    "completed": None,
    "transferred": None,
    "voicemail-left": None,
    "unavailable": None,
    "rejected": None,
    "voicemail": 4 * 3600,
    "busy": 600,
    "no-answer": 3600,
    "failed": 900,
    "error": 900,
    "abandoned": 300,
}

# Zone offsets are sampled this often to find DST transitions; real zones never
# change offset twice within this span.
_TRANSITION_PROBE = 6 * 3600


@dataclass(frozen=True)
class Window:
    """A weekly calling window in local wall-clock time.

    Attributes:
        days: weekdays the window applies to, 0 = Monday .. 6 = Sunday.
        start: first local time inside the window (inclusive).
        end: first local time after the window (exclusive); None means the end
            of the day (24:00). Otherwise ``end > start``: a window cannot
            cross midnight (write two windows instead).
    """

    days: frozenset[int]
    start: time
    end: time | None = None

    def __post_init__(self) -> None:
        if not self.days or not self.days <= frozenset(range(7)):
            raise ValueError(f"window days must be weekday numbers 0..6, got {sorted(self.days)}")
        if self.start.tzinfo is not None or (self.end is not None and self.end.tzinfo is not None):
            raise ValueError("window times are local wall-clock times, without a time zone")
        if self.end is not None and self.end <= self.start:
            raise ValueError(f"window end {self.end} must come after its start {self.start}")

    def contains(self, local: datetime) -> bool:
        """Whether a local (wall-clock) datetime falls inside this window."""
        clock = local.time()
        return (
            local.weekday() in self.days
            and self.start <= clock
            and (self.end is None or clock < self.end)
        )


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"expected an IANA time zone like America/New_York, got {name!r}"
        ) from None


def zone_exists(name: str) -> bool:
    """Whether ``name`` is an IANA time zone known to zoneinfo (e.g. ``Europe/Berlin``)."""
    try:
        _zone(name)
    except ValueError:
        return False
    return True


def _check_aware(at: datetime) -> None:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("expected a timezone-aware datetime, got a naive one")


def in_windows(at: datetime, zones: Sequence[str], windows: Sequence[Window]) -> bool:
    """Whether ``at`` is inside a calling window in every one of ``zones``.

    Args:
        at: the instant, timezone-aware.
        zones: the callee's IANA time zones.
        windows: the calling windows; none means always open.

    Returns:
        True when, in each zone, the local time is inside some window on that
        local weekday (start inclusive, end exclusive).

    Raises:
        ValueError: ``at`` is naive, a zone is unknown, or there are windows but
            no zones (a callee whose zone is unknown cannot be inside a window).
    """
    _check_aware(at)
    if not windows:
        return True
    if not zones:
        raise ValueError("expected at least one time zone to check calling windows in")
    for name in zones:
        local = at.astimezone(_zone(name))
        if not any(w.contains(local) for w in windows):
            return False
    return True


def _transitions(zone: ZoneInfo, lo: int, hi: int) -> list[int]:
    """POSIX seconds in ``[lo, hi]`` at which ``zone`` changes its UTC offset."""

    def offset(ts: int) -> timedelta | None:
        return datetime.fromtimestamp(ts, UTC).astimezone(zone).utcoffset()

    found: list[int] = []
    left = lo
    while left < hi:
        right = min(left + _TRANSITION_PROBE, hi)
        before = offset(left)
        if offset(right) != before:
            a, b = left, right  # offset(a) == before != offset(b)
            while b - a > 1:
                mid = (a + b) // 2
                if offset(mid) == before:
                    a = mid
                else:
                    b = mid
            found.append(b)
        left = right
    return found


def next_open(
    at: datetime,
    zones: Sequence[str],
    windows: Sequence[Window],
    horizon_days: int = 8,
) -> datetime | None:
    """The earliest instant at or after ``at`` inside the calling windows.

    Only instants where some zone may open are checked: each window's start on
    each local day (both readings of an ambiguous time) and each DST transition
    (a start inside a spring-forward gap opens at the transition).

    Args:
        at: the instant to start from, timezone-aware.
        zones: the callee's IANA time zones.
        windows: the calling windows; none means always open.
        horizon_days: how far ahead to look.

    Returns:
        ``at`` itself (in UTC) when open, else the first opening as an aware
        UTC datetime, or None when the windows do not open within the horizon
        (e.g. windows that never overlap across the zones).

    Raises:
        ValueError: as :func:`in_windows`.
    """
    if in_windows(at, zones, windows):
        return at.astimezone(UTC)
    start = at.astimezone(UTC)
    stop = start + timedelta(days=horizon_days)
    candidates: set[datetime] = set()
    for name in zones:
        zone = _zone(name)
        first = start.astimezone(zone).date() - timedelta(days=1)
        last = stop.astimezone(zone).date() + timedelta(days=1)
        for offset in range((last - first).days + 1):
            day: date = first + timedelta(days=offset)
            for window in windows:
                if day.weekday() not in window.days:
                    continue
                for fold in (0, 1):
                    local = datetime.combine(day, window.start, tzinfo=zone).replace(fold=fold)
                    candidates.add(local.astimezone(UTC))
        lo, hi = math.floor(start.timestamp()), math.ceil(stop.timestamp())
        candidates.update(datetime.fromtimestamp(ts, UTC) for ts in _transitions(zone, lo, hi))
    for candidate in sorted(candidates):
        if start <= candidate <= stop and in_windows(candidate, zones, windows):
            return candidate
    return None


def _check_outcome(value: str, what: str) -> None:
    if value not in OUTCOMES:
        raise ValueError(f"expected {what}, one of {', '.join(OUTCOMES)}; got {value!r}")


def outcome_of(disposition: str, voicemail_left: bool) -> str:
    """The outcome that drives retries, from a call's disposition.

    Args:
        disposition: the call's disposition, one of :data:`OUTCOMES`.
        voicemail_left: whether the agent left a message on a voicemail.

    Returns:
        ``"voicemail-left"`` for a voicemail with a message left, else the disposition.

    Raises:
        ValueError: an unknown disposition.
    """
    _check_outcome(disposition, "a disposition")
    if disposition == "voicemail" and voicemail_left:
        return "voicemail-left"
    return disposition


@dataclass(frozen=True)
class Decision:
    """What to do with a contact after an attempt.

    Attributes:
        retry: whether to dial the contact again.
        delay: seconds until the next attempt, when ``retry``; else None.
        result: when not ``retry``, the contact's final result: the outcome
            itself, or ``"max-attempts"`` when the outcome wanted a retry but
            the attempts ran out. Empty when ``retry``.
    """

    retry: bool
    delay: float | None
    result: str


@dataclass(frozen=True)
class RetryPolicy:
    """When to call a contact again, by the outcome of the last attempt.

    Attributes:
        max_attempts: attempts per contact, including the first.
        after: seconds to wait after each outcome, None = never retry (the
            outcome ends the contact); missing outcomes use
            :data:`DEFAULT_RETRY_AFTER`.
        backoff: the k-th retry waits ``after[outcome] * backoff ** (k - 1)``.
    """

    max_attempts: int = 3
    after: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_RETRY_AFTER))
    backoff: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts!r}")
        if not self.backoff > 0:
            raise ValueError(f"backoff must be above 0, got {self.backoff!r}")
        for outcome, delay in self.after.items():
            _check_outcome(outcome, "an outcome")
            if delay is not None and not delay >= 0:
                raise ValueError(f"retry delay after {outcome} must be >= 0, got {delay!r}")
        object.__setattr__(self, "after", MappingProxyType(dict(self.after)))

    def decide(self, outcome: str, attempts: int) -> Decision:
        """Decide whether to retry a contact.

        Args:
            outcome: the outcome of the attempt just made (see :func:`outcome_of`).
            attempts: attempts made so far, including this one (>= 1).

        Returns:
            A retry after a delay, or the contact's final result.

        Raises:
            ValueError: an unknown outcome or ``attempts < 1``.
        """
        if attempts < 1:
            raise ValueError(f"attempts counts the attempt just made, so >= 1; got {attempts}")
        _check_outcome(outcome, "an outcome")
        delay = self.after[outcome] if outcome in self.after else DEFAULT_RETRY_AFTER[outcome]
        if delay is None:
            return Decision(retry=False, delay=None, result=outcome)
        if attempts >= self.max_attempts:
            return Decision(retry=False, delay=None, result="max-attempts")
        return Decision(retry=True, delay=delay * self.backoff ** (attempts - 1), result="")


_PREFIX = re.compile(r"\+[1-9][0-9]{0,14}")


class DncList:
    """A do-not-call list: exact numbers and number prefixes (``+1900``).

    Attributes:
        numbers: the blocked numbers, canonical E.164.
        prefixes: the blocked prefixes.

    Its repr counts entries and never shows them.
    """

    def __init__(self, numbers: Iterable[str] = (), prefixes: Iterable[str] = ()) -> None:
        """Build the list.

        Args:
            numbers: E.164 numbers, in any form :func:`parse_e164` accepts.
            prefixes: ``'+'`` then digits, e.g. ``"+1900"``.

        Raises:
            PhoneNumberError: a number is not E.164.
            ValueError: a prefix is not ``'+'`` then digits.
        """
        self.numbers = frozenset(parse_e164(n) for n in numbers)
        self.prefixes = frozenset(p.strip() for p in prefixes if isinstance(p, str))
        for prefix in prefixes:
            if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix.strip()):
                raise ValueError(f"expected a number prefix like +1900, got {prefix!r}")

    def blocks(self, number: str) -> bool:
        """Whether ``number`` is on the list, exactly or by prefix."""
        try:
            number = parse_e164(number)
        except PhoneNumberError:
            number = number.strip()
        if number in self.numbers:
            return True
        return any(number[:end] in self.prefixes for end in range(2, len(number) + 1))

    def __or__(self, other: DncList) -> DncList:
        return DncList(self.numbers | other.numbers, self.prefixes | other.prefixes)

    def __len__(self) -> int:
        return len(self.numbers) + len(self.prefixes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DncList):
            return NotImplemented
        return (self.numbers, self.prefixes) == (other.numbers, other.prefixes)

    def __hash__(self) -> int:
        return hash((self.numbers, self.prefixes))

    def __repr__(self) -> str:
        return f"DncList({len(self.numbers)} numbers, {len(self.prefixes)} prefixes)"


class Pacer:
    """Token bucket: at most ``per_second`` new dials per second, bursts up to ``burst``.

    The bucket starts full. Times are monotonic seconds passed in by the
    caller; a time earlier than one already seen adds nothing.
    """

    # tolerance so that waiting exactly wait(now) seconds always frees a dial
    _EPSILON = 1e-9

    def __init__(self, per_second: float, burst: int = 1) -> None:
        """Build a full bucket.

        Raises:
            ValueError: ``per_second <= 0`` or ``burst < 1``.
        """
        if not per_second > 0:
            raise ValueError(f"per_second must be above 0, got {per_second!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self.per_second = float(per_second)
        self.burst = burst
        self._tokens = float(burst)
        self._last: float | None = None

    def _refill(self, now: float) -> None:
        if self._last is not None and now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.per_second)
        self._last = now if self._last is None else max(self._last, now)

    def available(self, now: float) -> int:
        """How many dials may start at ``now``."""
        self._refill(now)
        return math.floor(self._tokens + self._EPSILON)

    def take(self, now: float, n: int = 1) -> None:
        """Record that ``n`` dials start at ``now``.

        Raises:
            ValueError: more dials than :meth:`available` allows.
        """
        free = self.available(now)
        if n > free:
            raise ValueError(f"cannot start {n} dials now, only {free} allowed by the pacing")
        self._tokens = max(0.0, self._tokens - n)

    def wait(self, now: float) -> float:
        """Seconds from ``now`` until one more dial may start (0 if one may start now)."""
        self._refill(now)
        if self._tokens + self._EPSILON >= 1:
            return 0.0
        return (1 - self._tokens) / self.per_second


def zones_for_number(number: str) -> tuple[str, ...]:
    """IANA time zones of a number's country or area.

    Args:
        number: an E.164 number.

    Returns:
        The zones phonenumbers maps the number to (several for a country or
        area spanning zones), or ``()`` when unknown or unparsable.
    """
    try:
        parsed = phonenumbers.parse(number)
    except phonenumbers.NumberParseException:
        return ()
    names = phone_timezone.time_zones_for_number(parsed)
    return tuple(n for n in names if n != "Etc/Unknown" and zone_exists(n))


_NUMBER = r"(\d+(?:\.\d+)?)"
_DURATION = re.compile(f"(?:{_NUMBER}d)?(?:{_NUMBER}h)?(?:{_NUMBER}m)?(?:{_NUMBER}s)?")


def parse_duration(text: str | int | float, key: str) -> float | None:
    """Parse a duration: ``"90s"``, ``"10m"``, ``"1h30m"``, ``"2d"``, seconds, or ``"never"``.

    Args:
        text: the duration; a bare number (or numeric text) is seconds.
        key: the setting's name, for the error message.

    Returns:
        Seconds (>= 0), or None for ``"never"``.

    Raises:
        ValueError: anything else, as ``"KEY: expected ..., got ..."``.
    """
    expected = ValueError(
        f"{key}: expected a duration like 90s, 10m, 1h30m or 2d "
        f"(a bare number is seconds) or 'never', got {text!r}"
    )
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise expected
    cleaned = "".join(str(text).split()).lower()
    if cleaned == "never":
        return None
    try:
        seconds = float(cleaned)
    except ValueError:
        match = _DURATION.fullmatch(cleaned)
        if not cleaned or match is None:
            raise expected from None
        seconds = sum(
            float(v) * u for v, u in zip(match.groups(), (86400, 3600, 60, 1), strict=True) if v
        )
    if not (math.isfinite(seconds) and seconds >= 0):
        raise expected
    return seconds


_DAY_SETS = {"daily": range(7), "weekdays": range(5), "weekends": range(5, 7)}
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")


def _day(name: str) -> int | None:
    name = name.strip()
    if name in WEEKDAYS:
        return WEEKDAYS.index(name)
    return _FULL_DAYS.index(name) if name in _FULL_DAYS else None


def parse_days(text: str | Sequence[str]) -> frozenset[int]:
    """Weekdays (0 = Monday) from ``"mon-fri"``, ``"sat"``, ``"mon,wed,fri"``, ``["mon", "tue"]``.

    ``"daily"``, ``"weekdays"``, ``"weekends"`` and full names work too; a range
    may wrap around the week (``"fri-mon"``).

    Raises:
        ValueError: anything else.
    """
    parts = text.split(",") if isinstance(text, str) else list(text)
    days: set[int] = set()
    for raw in parts:
        part = raw.strip().lower()
        first, _, last = part.partition("-")
        if part in _DAY_SETS:
            days.update(_DAY_SETS[part])
        elif (a := _day(first)) is not None and (b := _day(last) if last else a) is not None:
            days.update((a + n) % 7 for n in range((b - a) % 7 + 1))
        else:
            days.clear()
            break
    if not days:
        shown = text if isinstance(text, str) else list(text)
        raise ValueError(
            f"expected weekdays like mon-fri, sat, mon,wed,fri or daily, got {shown!r}"
        )
    return frozenset(days)


def parse_clock(text: str, *, end: bool = False) -> time | None:
    """A local time from ``"HH:MM"``; with ``end``, ``"24:00"`` gives None (the end of the day).

    Raises:
        ValueError: anything else.
    """
    match = _CLOCK.fullmatch(text.strip())
    hours, minutes = (int(match.group(1)), int(match.group(2))) if match else (99, 99)
    if end and (hours, minutes) == (24, 0):
        return None
    if hours > 23 or minutes > 59:
        what = "a time HH:MM" + (" (24:00 for the end of the day)" if end else "")
        raise ValueError(f"expected {what}, got {text!r}")
    return time(hours, minutes)
