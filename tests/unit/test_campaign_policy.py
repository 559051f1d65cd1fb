"""The campaign scheduler's pure decisions: windows, next opening, retries, DNC, pacing."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent.campaigns.policy import (
    DEFAULT_RETRY_AFTER,
    OUTCOMES,
    Decision,
    DncList,
    Pacer,
    RetryPolicy,
    Window,
    in_windows,
    next_open,
    outcome_of,
    parse_clock,
    parse_days,
    parse_duration,
    zones_for_number,
)
from agent.telephony.phone import PhoneNumberError

NY = "America/New_York"
LA = "America/Los_Angeles"
TOKYO = "Asia/Tokyo"
WEEKDAYS_9_TO_8 = [Window(frozenset(range(5)), time(9), time(20))]
DAILY_9_TO_8 = [Window(frozenset(range(7)), time(9), time(20))]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def local(zone: str, *args: int) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(zone))  # type: ignore[misc]


# ----------------------------------------------------------------------------- windows


def test_window_start_is_inclusive_and_end_exclusive() -> None:
    monday = (2024, 3, 4)
    assert in_windows(local(NY, *monday, 9, 0), [NY], WEEKDAYS_9_TO_8)
    assert in_windows(local(NY, *monday, 19, 59, 59), [NY], WEEKDAYS_9_TO_8)
    assert not in_windows(local(NY, *monday, 8, 59, 59), [NY], WEEKDAYS_9_TO_8)
    assert not in_windows(local(NY, *monday, 20, 0), [NY], WEEKDAYS_9_TO_8)


def test_window_uses_the_local_weekday() -> None:
    saturday_noon = local(NY, 2024, 3, 2, 12, 0)
    assert not in_windows(saturday_noon, [NY], WEEKDAYS_9_TO_8)
    # Friday 23:00 in New York is already Saturday in UTC; the local day counts
    friday_late = local(NY, 2024, 3, 1, 19, 30)
    assert friday_late.astimezone(UTC).weekday() == 5
    assert in_windows(friday_late, [NY], WEEKDAYS_9_TO_8)


def test_end_of_day_window_runs_to_midnight() -> None:
    evening = [Window(frozenset(range(7)), time(18), None)]
    assert in_windows(local(NY, 2024, 3, 4, 23, 59, 59), [NY], evening)
    assert not in_windows(local(NY, 2024, 3, 5, 0, 0), [NY], evening)


def test_no_windows_means_always_open() -> None:
    assert in_windows(utc(2024, 3, 3, 3, 0), [NY], [])


def test_spring_forward_day_keeps_local_hours() -> None:
    # 2024-03-10: New York moves from EST (-5) to EDT (-4) at 02:00 local
    assert in_windows(utc(2024, 3, 10, 13, 0), [NY], DAILY_9_TO_8)  # 09:00 EDT
    assert not in_windows(utc(2024, 3, 10, 12, 59), [NY], DAILY_9_TO_8)  # 08:59 EDT
    assert in_windows(utc(2024, 3, 9, 14, 0), [NY], DAILY_9_TO_8)  # 09:00 EST, the day before
    assert not in_windows(utc(2024, 3, 9, 13, 30), [NY], DAILY_9_TO_8)


def test_fall_back_day_keeps_local_hours() -> None:
    # 2024-11-03: back from EDT to EST at 02:00 local
    assert in_windows(utc(2024, 11, 3, 14, 0), [NY], DAILY_9_TO_8)  # 09:00 EST
    assert not in_windows(utc(2024, 11, 3, 13, 59), [NY], DAILY_9_TO_8)  # 08:59 EST
    assert not in_windows(utc(2024, 11, 4, 1, 0), [NY], DAILY_9_TO_8)  # 20:00 EST


def test_several_zones_must_all_be_inside() -> None:
    monday = (2024, 3, 4)
    assert not in_windows(utc(*monday, 14, 0), [NY, LA], WEEKDAYS_9_TO_8)  # 09:00 NY, 06:00 LA
    assert in_windows(utc(*monday, 17, 0), [NY, LA], WEEKDAYS_9_TO_8)  # 12:00 NY, 09:00 LA
    assert not in_windows(utc(2024, 3, 5, 1, 30), [NY, LA], WEEKDAYS_9_TO_8)  # 20:30 NY
    assert in_windows(utc(2024, 3, 5, 1, 30), [LA], WEEKDAYS_9_TO_8)  # 17:30 LA


def test_windows_need_an_aware_time_and_a_zone() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        in_windows(datetime(2024, 3, 4, 12), [NY], WEEKDAYS_9_TO_8)
    with pytest.raises(ValueError, match="time zone"):
        in_windows(utc(2024, 3, 4, 12), [], WEEKDAYS_9_TO_8)
    with pytest.raises(ValueError, match="IANA"):
        in_windows(utc(2024, 3, 4, 12), ["Mars/Olympus"], WEEKDAYS_9_TO_8)


def test_window_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="after its start"):
        Window(frozenset({0}), time(10), time(9))
    with pytest.raises(ValueError, match="weekday"):
        Window(frozenset(), time(9), time(10))
    with pytest.raises(ValueError, match="weekday"):
        Window(frozenset({7}), time(9), time(10))


# ----------------------------------------------------------------------------- next_open


def test_next_open_is_now_when_open() -> None:
    now = local(NY, 2024, 3, 4, 10, 15, 30)
    opened = next_open(now, [NY], WEEKDAYS_9_TO_8)
    assert opened == now
    assert opened is not None and opened.tzinfo == UTC


def test_next_open_from_saturday_is_monday_morning() -> None:
    saturday = local(NY, 2024, 3, 2, 12, 0)
    assert next_open(saturday, [NY], WEEKDAYS_9_TO_8) == utc(2024, 3, 4, 14, 0)


def test_next_open_later_the_same_day() -> None:
    early = local(NY, 2024, 3, 4, 7, 12, 5)
    assert next_open(early, [NY], WEEKDAYS_9_TO_8) == utc(2024, 3, 4, 14, 0)


def test_next_open_waits_for_the_last_zone() -> None:
    # 08:00 in New York: New York opens at 14:00 UTC, but Los Angeles only at 17:00 UTC
    assert next_open(utc(2024, 3, 4, 13, 0), [NY, LA], WEEKDAYS_9_TO_8) == utc(2024, 3, 4, 17, 0)


def test_next_open_over_the_dst_change() -> None:
    # Saturday 21:00 EST -> Sunday 09:00 EDT, which is 13:00 UTC (not 14:00)
    assert next_open(utc(2024, 3, 10, 2, 0), [NY], DAILY_9_TO_8) == utc(2024, 3, 10, 13, 0)


def test_window_starting_in_the_spring_forward_gap_opens_at_the_change() -> None:
    # 02:30 does not exist on 2024-03-10 in New York; 01:59:59 EST is followed by 03:00 EDT
    night = [Window(frozenset({6}), time(2, 30), time(4))]
    assert next_open(utc(2024, 3, 10, 5, 0), [NY], night) == utc(2024, 3, 10, 7, 0)


def test_fall_back_reopens_a_window_at_the_second_pass() -> None:
    # 01:00-01:30 happens twice on 2024-11-03; at 01:40 EDT the next opening is 01:00 EST
    early = [Window(frozenset({6}), time(1), time(1, 30))]
    assert next_open(utc(2024, 11, 3, 5, 40), [NY], early) == utc(2024, 11, 3, 6, 0)


def test_next_open_never_when_zones_never_overlap() -> None:
    morning = [Window(frozenset(range(5)), time(9), time(10))]
    assert next_open(utc(2024, 3, 4, 0, 0), [NY, TOKYO], morning) is None


def test_next_open_respects_the_horizon() -> None:
    sundays = [Window(frozenset({6}), time(9), time(17))]
    monday = local(NY, 2024, 3, 4, 12, 0)
    assert next_open(monday, [NY], sundays, horizon_days=2) is None
    assert next_open(monday, [NY], sundays) == utc(2024, 3, 10, 13, 0)


# ----------------------------------------------------------------------------- retries


def test_outcome_of_voicemail() -> None:
    assert outcome_of("voicemail", True) == "voicemail-left"
    assert outcome_of("voicemail", False) == "voicemail"
    assert outcome_of("busy", False) == "busy"
    assert outcome_of("completed", True) == "completed"
    with pytest.raises(ValueError, match="disposition"):
        outcome_of("hung-up", False)


def test_default_retry_covers_every_outcome() -> None:
    assert set(DEFAULT_RETRY_AFTER) == set(OUTCOMES)


def test_retry_after_busy_then_max_attempts() -> None:
    policy = RetryPolicy()
    assert policy.decide("busy", 1) == Decision(retry=True, delay=600, result="")
    assert policy.decide("busy", 2).retry
    assert policy.decide("busy", 3) == Decision(retry=False, delay=None, result="max-attempts")


def test_final_outcomes_end_the_contact() -> None:
    policy = RetryPolicy()
    for outcome in ("completed", "transferred", "voicemail-left", "unavailable", "rejected"):
        assert policy.decide(outcome, 1) == Decision(retry=False, delay=None, result=outcome)
    # a final outcome on the last attempt is still that outcome, not max-attempts
    assert policy.decide("completed", 3).result == "completed"


def test_retry_backoff_grows_each_retry() -> None:
    policy = RetryPolicy(max_attempts=5, after={"no-answer": 60}, backoff=2)
    delays = [policy.decide("no-answer", n).delay for n in (1, 2, 3, 4)]
    assert delays == [60, 120, 240, 480]
    assert policy.decide("no-answer", 5).result == "max-attempts"


def test_retry_overrides_fall_back_to_defaults() -> None:
    policy = RetryPolicy(after={"busy": None, "voicemail-left": 86400})
    assert policy.decide("busy", 1) == Decision(retry=False, delay=None, result="busy")
    assert policy.decide("voicemail-left", 1).delay == 86400
    assert policy.decide("no-answer", 1).delay == DEFAULT_RETRY_AFTER["no-answer"]


def test_retry_policy_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="outcome"):
        RetryPolicy(after={"hung-up": 10})
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="backoff"):
        RetryPolicy(backoff=0)
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy().decide("busy", 0)
    with pytest.raises(ValueError, match="outcome"):
        RetryPolicy().decide("hung-up", 1)


# ----------------------------------------------------------------------------- DNC


def test_dnc_numbers_and_prefixes() -> None:
    dnc = DncList(numbers=["+1 (555) 010-0199"], prefixes=["+1900"])
    assert dnc.blocks("+15550100199")
    assert dnc.blocks("+1 555 010 0199")
    assert dnc.blocks("+19005550100")
    assert not dnc.blocks("+15550100198")
    assert not dnc.blocks("+12125550100")
    assert not DncList().blocks("+15550100199")
    assert len(dnc) == 2


def test_dnc_union_and_repr_hide_numbers() -> None:
    union = DncList(["+15550100199"]) | DncList(prefixes=["+4490"])
    assert union.blocks("+15550100199") and union.blocks("+449012345678")
    assert len(union) == 2
    assert union == DncList(["+15550100199"], ["+4490"])
    assert "555" not in repr(union)


def test_dnc_rejects_bad_entries() -> None:
    with pytest.raises(PhoneNumberError):
        DncList(["5550100199"])
    with pytest.raises(ValueError, match="prefix"):
        DncList(prefixes=["1900"])


# ----------------------------------------------------------------------------- pacing


def test_pacer_bursts_then_paces() -> None:
    pacer = Pacer(per_second=2, burst=3)
    assert pacer.available(100.0) == 3
    pacer.take(100.0, 3)
    assert pacer.available(100.0) == 0
    assert pacer.wait(100.0) == pytest.approx(0.5)
    assert pacer.available(100.25) == 0
    assert pacer.wait(100.25) == pytest.approx(0.25)
    assert pacer.available(100.5) == 1
    pacer.take(100.5)
    assert pacer.wait(100.5) == pytest.approx(0.5)
    assert pacer.available(200.0) == 3  # refills to the burst, no further


def test_pacer_dials_at_the_rate_when_waiting_exactly() -> None:
    pacer = Pacer(per_second=3)
    now, starts = 0.0, []
    for _ in range(10):
        now += pacer.wait(now)
        pacer.take(now)
        starts.append(now)
    assert starts == pytest.approx([n / 3 for n in range(10)])


def test_pacer_refuses_more_than_available_and_ignores_time_going_back() -> None:
    pacer = Pacer(per_second=1)
    pacer.take(10.0)
    with pytest.raises(ValueError, match="pacing"):
        pacer.take(10.5)
    assert pacer.available(5.0) == 0
    assert pacer.available(11.0) == 1
    with pytest.raises(ValueError):
        Pacer(per_second=0)
    with pytest.raises(ValueError):
        Pacer(per_second=1, burst=0)


# ----------------------------------------------------------------------------- zones, text


def test_zones_for_number() -> None:
    assert zones_for_number("+12125550100") == (NY,)
    assert zones_for_number("+442079460101") == ("Europe/London",)
    assert zones_for_number("+15550100101") == ()  # 555 is no area
    assert zones_for_number("not a number") == ()
    toll_free = zones_for_number("+18005550100")
    assert len(toll_free) > 3 and NY in toll_free and LA in toll_free


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h", 3600),
        ("1h30m", 5400),
        ("1h 30m", 5400),
        ("2d", 172800),
        ("1.5h", 5400),
        ("45", 45),
        (45, 45),
        (2.5, 2.5),
        ("0", 0),
        ("never", None),
        ("Never", None),
    ],
)
def test_parse_duration(text: str | float, seconds: float | None) -> None:
    assert parse_duration(text, "retry.after.busy") == seconds


@pytest.mark.parametrize("text", ["", "soon", "10x", "m10", "30m1h", "1h1h", "-5", -5, True, "nan"])
def test_parse_duration_rejects(text: str | float) -> None:
    with pytest.raises(ValueError, match=r"^retry\.after\.busy: expected a duration like 90s"):
        parse_duration(text, "retry.after.busy")


def test_parse_days_and_clock() -> None:
    assert parse_days("mon-fri") == frozenset(range(5))
    assert parse_days("Sat") == frozenset({5})
    assert parse_days("mon,wed,fri") == frozenset({0, 2, 4})
    assert parse_days(["mon", "tuesday"]) == frozenset({0, 1})
    assert parse_days("daily") == frozenset(range(7))
    assert parse_days("fri-mon") == frozenset({4, 5, 6, 0})
    with pytest.raises(ValueError, match="weekdays"):
        parse_days("someday")
    assert parse_clock("09:00") == time(9)
    assert parse_clock("9:30") == time(9, 30)
    assert parse_clock("24:00", end=True) is None
    for bad in ("24:00", "9", "12:60", "noon"):
        with pytest.raises(ValueError, match="HH:MM"):
            parse_clock(bad)


def test_next_open_result_is_inside_and_nothing_earlier_is() -> None:
    # a brute-force check of next_open against in_windows, minute by minute
    windows = [Window(frozenset({0, 2}), time(9), time(12)), Window(frozenset({5}), time(10))]
    start = utc(2024, 3, 5, 22, 17)
    opened = next_open(start, [NY, "Europe/Berlin"], windows)
    assert opened is not None
    probe = start
    while probe < opened:
        assert not in_windows(probe, [NY, "Europe/Berlin"], windows)
        probe += timedelta(minutes=1)
    assert in_windows(opened, [NY, "Europe/Berlin"], windows)
