"""What a campaign's store hands to reports and status displays: plain rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["AttemptRecord", "CampaignSummary"]


@dataclass(frozen=True)
class AttemptRecord:
    """One dial attempt of one contact, as the store knows it.

    Times are timezone-aware UTC datetimes (on a simulated campaign clock they
    are simulated times). ``status`` is ``dialing`` (in flight), ``done`` (the
    call ended and was recorded) or ``abandoned`` (the dialer holding it died;
    the attempt counts but has no disposition).
    """

    attempt_id: int
    contact_id: int
    contact_line: int
    number: str = field(repr=False)
    attempt_no: int
    dialer: str
    started_at: datetime
    ended_at: datetime | None
    status: str
    disposition: str | None = None
    voicemail_left: bool = False
    amd_category: str | None = None
    #: seconds from the answer to the end of the call (0 for unanswered calls)
    duration: float | None = None
    call_id: str | None = None
    transcript_path: str | None = None
    recording_path: str | None = None


@dataclass(frozen=True)
class CampaignSummary:
    """A campaign's state at one moment (what ``campaign status`` shows).

    ``contacts`` counts contacts by state (``pending``, ``dialing``, ``done``);
    ``results`` counts finished contacts by final result (``completed``,
    ``voicemail-left``, ``max-attempts``, ``dnc``, ``cancelled``, ...);
    ``dispositions`` counts finished attempts by disposition.
    """

    name: str
    status: str
    created_at: datetime
    total_contacts: int
    contacts: dict[str, int]
    results: dict[str, int]
    dispositions: dict[str, int]
    attempts: int
    in_flight: int
    first_dial_at: datetime | None = None
    last_end_at: datetime | None = None
