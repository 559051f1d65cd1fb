"""Guardian: phone numbers, configuration, caller verification, the question desk."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import ValidationError

from agent.core import clock
from agent.telephony.phone import PhoneNumberError, mask_number, parse_e164
from agent.trust.desk import GuardianDesk, PendingQuestion, QuestionClosed, UnknownQuestion
from agent.trust.guardian import GuardianConfig
from agent.trust.verifier import REDACTED, GuardianVerifier

GUARDIAN = "+15551234567"
STRANGER = "+15559876543"

# -- phone numbers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["+15551234567", "+1 (555) 123-4567", "+1.555.123.4567", " +1 555 123 4567 ", "+1-555-1234567"],
)
def test_parse_e164_accepts_common_ways_of_writing_a_number(text: str) -> None:
    assert parse_e164(text) == GUARDIAN


@pytest.mark.parametrize(
    "text",
    [
        "555-1234",  # no '+'
        "15551234567",  # no '+'
        "+05551234567",  # country code cannot start with 0
        "+1234567890123456",  # 16 digits
        "+1234567",  # 7 digits
        "+1 555 CALL NOW",  # letters
        "+",
        "",
        "+1 555 123 4567 ext 5",
    ],
)
def test_parse_e164_rejects_other_text_with_a_one_line_message(text: str) -> None:
    with pytest.raises(PhoneNumberError) as info:
        parse_e164(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("expected an E.164 number like +15551234567")
    assert message.endswith(f"got {text!r}")
    assert isinstance(info.value, ValueError)


def test_parse_e164_message_matches_the_documented_wording() -> None:
    with pytest.raises(PhoneNumberError) as info:
        parse_e164("555-1234")
    assert str(info.value) == (
        "expected an E.164 number like +15551234567 (a '+', the country code, "
        "then up to 15 digits in all), got '555-1234'"
    )
    assert info.value.reason == "no leading '+'"


def test_parse_e164_bounds_are_8_to_15_digits() -> None:
    assert parse_e164("+12345678") == "+12345678"
    assert parse_e164("+123456789012345") == "+123456789012345"


def test_mask_number_keeps_only_the_start_and_the_last_two_digits() -> None:
    assert mask_number("+15551234567") == "+1********67"
    assert mask_number("+1 (555) 123-4567") == "+1********67"
    assert mask_number("not a number 5551234567") == "***"


# -- configuration -----------------------------------------------------------------------


def test_config_defaults_are_disabled() -> None:
    config = GuardianConfig()
    assert not config.enabled
    assert config.question_timeout == 60.0
    assert "{answer}" in config.answer_instructions
    assert config.format_answer("yes, Tuesday").startswith(
        "The person you checked with answered: yes, Tuesday."
    )


def test_config_canonicalises_numbers_and_enables_the_guardian() -> None:
    config = GuardianConfig(numbers=["+1 (555) 123-4567", GUARDIAN])
    assert config.numbers == [GUARDIAN]
    assert config.enabled
    assert GuardianConfig(pin="0420").enabled
    assert GuardianConfig(passphrase="blue heron").enabled


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"numbers": [GUARDIAN, "555-1234"]}, "numbers[1]: expected an E.164 number"),
        ({"pin": "12a4"}, "pin must be 4-10 digits"),
        ({"pin": "123"}, "pin must be 4-10 digits"),
        ({"pin": "12345678901"}, "pin must be 4-10 digits"),
        ({"pin": 1234}, "in quotes"),
        ({"passphrase": "heron"}, "passphrase must be at least 2 words"),
        ({"passphrase": ""}, "passphrase must be at least 2 words"),
        ({"question_timeout": 0}, "greater than 0"),
        ({"question_timeout": 7200}, "less than or equal to 3600"),
        ({"answer_instructions": "Tell the caller."}, "must contain {answer}"),
        ({"answer_instructions": "{answer} for {caller}"}, "must contain {answer}"),
        ({"pins": "1234"}, "Extra inputs are not permitted"),
    ],
)
def test_config_errors_name_the_key(values: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        GuardianConfig(**values)
    message = str(info.value)
    assert next(iter(values)) in message
    assert expected in message


def test_config_errors_do_not_echo_a_secret() -> None:
    with pytest.raises(ValidationError) as info:
        GuardianConfig(pin="98x76")
    assert "98x76" not in str(info.value)


# -- verification ------------------------------------------------------------------------


def _verifier(caller: str | None = GUARDIAN, **config: Any) -> GuardianVerifier:
    return GuardianVerifier(GuardianConfig(**config), caller)


def test_no_guardian_configured_never_verifies() -> None:
    v = _verifier()
    assert v.state == "unverified"
    assert not v.check_turn("my pin is 1234")
    assert not v.check_dtmf("1234#")
    assert v.state == "unverified"


def test_caller_id_alone_verifies_the_guardian_number_from_the_start() -> None:
    assert _verifier("+1 555 123 4567", numbers=[GUARDIAN]).state == "verified"
    assert _verifier(GUARDIAN, numbers=[GUARDIAN]).method == "caller_id"
    assert _verifier(STRANGER, numbers=[GUARDIAN]).state == "unverified"
    assert _verifier(None, numbers=[GUARDIAN]).state == "unverified"
    assert _verifier("anonymous", numbers=[GUARDIAN]).state == "unverified"


@pytest.mark.parametrize(
    "turn",
    [
        "my pin is 0420",
        "It's 0420.",
        "zero four two zero",
        "oh four two oh",
        "Oh, 0 4 2 0",
        "oh 0420",
        "0, 4, 2, 0",
        "04-20",
        "Zero. Four. Two. Zero.",
        "The code is 0 four 2 zero please",
    ],
)
def test_the_pin_said_as_digits_or_words_verifies(turn: str) -> None:
    v = _verifier(numbers=[GUARDIAN], pin="0420")
    assert v.state == "unverified"
    assert v.check_turn(turn)
    assert v.state == "verified"
    assert v.method == "pin"


@pytest.mark.parametrize("turn", ["04201", "one zero four two zero", "0 4 2", "4200", "hello"])
def test_other_numbers_do_not_verify(turn: str) -> None:
    v = _verifier(pin="0420")
    assert not v.check_turn(turn)
    assert v.state == "unverified"


def test_the_pin_keyed_verifies_with_or_without_hash() -> None:
    v = _verifier(numbers=[GUARDIAN], pin="0420")
    assert v.check_dtmf("0420#")
    assert v.method == "dtmf"
    assert _verifier(pin="0420").check_dtmf("0420")
    assert not _verifier(pin="0420").check_dtmf("04201#")


def test_pin_without_numbers_verifies_any_caller_who_knows_it() -> None:
    v = _verifier(None, pin="0420")
    assert v.check_turn("0 4 2 0")


def test_a_wrong_number_never_verifies_even_with_the_right_secret() -> None:
    v = _verifier(STRANGER, numbers=[GUARDIAN], pin="0420", passphrase="blue heron")
    assert not v.check_turn("my pin is 0420")
    assert not v.check_dtmf("0420#")
    assert not v.check_turn("blue heron")
    assert v.state == "unverified"
    assert not v.can_verify


@pytest.mark.parametrize(
    "turn", ["Blue heron", "it's BLUE   heron!", "the words are blue, heron.", "blue-heron"]
)
def test_the_passphrase_verifies_ignoring_case_punctuation_and_spacing(turn: str) -> None:
    v = _verifier(numbers=[GUARDIAN], passphrase="Blue Heron")
    assert v.check_turn(turn)
    assert v.method == "passphrase"


def test_part_of_the_passphrase_does_not_verify() -> None:
    v = _verifier(passphrase="blue heron")
    assert not v.check_turn("blue")
    assert not v.check_turn("blueheron")
    assert not v.check_turn("blue herons")


def test_three_wrong_attempts_lock_verification() -> None:
    v = _verifier(numbers=[GUARDIAN], pin="0420")
    assert not v.check_turn("my pin is 1111")
    assert not v.check_dtmf("2222#")
    assert not v.locked
    assert not v.check_turn("one two three four")
    assert v.locked
    assert not v.check_turn("0420")
    assert not v.check_dtmf("0420#")
    assert v.state == "unverified"


def test_conversation_with_numbers_is_not_a_wrong_attempt() -> None:
    v = _verifier(pin="0420")
    for _ in range(5):
        v.check_turn("I live at 1234 Main Street and my order was 5555")
        v.check_turn("it was two days ago")
    assert not v.locked
    assert v.failed_attempts == 0
    assert v.check_turn("0420")


def test_a_turn_of_many_guesses_is_one_wrong_attempt_and_never_verifies() -> None:
    v = _verifier(pin="0420")
    assert not v.check_turn("0417, 0418, 0419, 0420, 0421")
    assert v.failed_attempts == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my pin is 0420 thanks", f"my pin is {REDACTED} thanks"),
        ("It's zero four two zero.", f"It's {REDACTED}."),
        ("oh four two oh", REDACTED),
        ("0, 4, 2, 0 and blue heron", f"{REDACTED} and {REDACTED}"),
        ("The words are BLUE, Heron!", f"The words are {REDACTED}!"),
        ("I said 04201 by mistake", f"I said {REDACTED} by mistake"),
        ("room 1234 on the blue floor", "room 1234 on the blue floor"),
    ],
)
def test_redact_removes_the_secret_in_each_form_and_keeps_other_text(
    text: str, expected: str
) -> None:
    v = _verifier(pin="0420", passphrase="blue heron")
    assert v.redact(text) == expected


# -- the question desk -------------------------------------------------------------------


def test_ask_answer_and_wait() -> None:
    async def main() -> tuple[PendingQuestion, str | None, str | None]:
        desk = GuardianDesk()
        q = desk.ask("call_1", "  Can I book Tuesday?  ")
        assert desk.pending() == [q]
        waiter = asyncio.ensure_future(desk.wait(q.id, timeout=30))
        await asyncio.sleep(1)
        desk.answer(q.id, "  yes, after 2pm ")
        answer = await waiter
        return q, answer, await desk.wait(q.id, timeout=30)

    q, answer, again = clock.run(main())
    assert q.id.startswith("q_") and len(q.id) > 2
    assert q.question == "Can I book Tuesday?"
    assert answer == again == "yes, after 2pm"
    assert q.status == "answered"
    assert q.answer == "yes, after 2pm"
    assert q.answered_at is not None and q.answered_at >= q.asked_at


def test_wait_times_out_on_the_virtual_clock() -> None:
    async def main() -> tuple[str | None, float, PendingQuestion]:
        desk = GuardianDesk()
        q = desk.ask("call_1", "Is the gate code still 44?")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        answer = await desk.wait(q.id, timeout=60)
        return answer, loop.time() - t0, q

    answer, waited, q = clock.run(main())
    assert answer is None
    assert waited == pytest.approx(60.0)
    assert q.status == "timed_out"


def test_answer_after_a_timeout_is_rejected() -> None:
    async def main() -> None:
        desk = GuardianDesk()
        q = desk.ask("call_1", "Tuesday?")
        assert await desk.wait(q.id, timeout=5) is None
        with pytest.raises(QuestionClosed, match="already timed out"):
            desk.answer(q.id, "yes")

    clock.run(main())


def test_cancelling_the_waiter_leaves_the_question_pending() -> None:
    async def main() -> tuple[PendingQuestion, GuardianDesk]:
        desk = GuardianDesk()
        q = desk.ask("call_1", "Tuesday?")
        waiter = asyncio.ensure_future(desk.wait(q.id, timeout=60))
        await asyncio.sleep(1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.sleep(120)
        return q, desk

    q, desk = clock.run(main())
    assert q.status == "pending"
    assert desk.answer(q.id, "yes").status == "answered"


def test_cancel_call_cancels_only_that_calls_questions_and_wakes_waiters() -> None:
    async def main() -> tuple[list[str | None], GuardianDesk, PendingQuestion]:
        desk = GuardianDesk()
        a = desk.ask("call_1", "first?")
        b = desk.ask("call_1", "second?")
        other = desk.ask("call_2", "other?")
        waiters = [asyncio.ensure_future(desk.wait(q.id, timeout=60)) for q in (a, b)]
        await asyncio.sleep(0)
        assert [q.id for q in desk.cancel_call("call_1")] == [a.id, b.id]
        return list(await asyncio.gather(*waiters)), desk, other

    results, desk, other = clock.run(main())
    assert results == [None, None]
    assert desk.pending() == [other]
    assert desk.get(other.id) is other


def test_subscribers_see_every_event_until_they_unsubscribe() -> None:
    async def main() -> list[tuple[str, str]]:
        desk = GuardianDesk()
        seen: list[tuple[str, str]] = []
        unsubscribe = desk.subscribe(lambda event, q: seen.append((event, q.question)))

        def broken(event: str, q: PendingQuestion) -> None:
            raise RuntimeError("subscriber bug")

        desk.subscribe(broken)
        a = desk.ask("call_1", "a?")
        desk.answer(a.id, "yes")
        b = desk.ask("call_1", "b?")
        await desk.wait(b.id, timeout=1)
        desk.ask("call_2", "c?")
        desk.cancel_call("call_2")
        unsubscribe()
        desk.ask("call_3", "d?")
        return seen

    assert clock.run(main()) == [
        ("asked", "a?"),
        ("answered", "a?"),
        ("asked", "b?"),
        ("timed_out", "b?"),
        ("asked", "c?"),
        ("cancelled", "c?"),
    ]


def test_desk_errors_are_clear() -> None:
    desk = GuardianDesk()
    q = desk.ask("call_1", "Tuesday?")
    with pytest.raises(UnknownQuestion, match="no guardian question with id 'q_nope'"):
        desk.answer("q_nope", "yes")
    with pytest.raises(ValueError, match="answer cannot be empty"):
        desk.answer(q.id, "   ")
    with pytest.raises(ValueError, match="question cannot be empty"):
        desk.ask("call_1", " ")
    desk.answer(q.id, "yes")
    with pytest.raises(QuestionClosed, match="already answered") as info:
        desk.answer(q.id, "no")
    assert isinstance(info.value, LookupError)
    assert desk.get("q_nope") is None

    async def wait_unknown() -> None:
        with pytest.raises(UnknownQuestion):
            await desk.wait("q_nope", timeout=1)

    clock.run(wait_unknown())


def test_answer_threadsafe_from_another_thread_wakes_the_waiter() -> None:
    async def main() -> tuple[str | None, list[str]]:
        desk = GuardianDesk()
        q = desk.ask("call_1", "Tuesday?")
        loop = asyncio.get_running_loop()
        errors: list[str] = []

        def guardian() -> None:
            desk.answer_threadsafe(loop, q.id, "yes")
            try:
                desk.answer_threadsafe(loop, q.id, "again")
            except QuestionClosed as e:
                errors.append(str(e))

        with pytest.raises(RuntimeError, match="own loop"):
            desk.answer_threadsafe(loop, q.id, "yes")
        thread = threading.Thread(target=guardian)
        thread.start()
        answer = await desk.wait(q.id, timeout=30)
        await asyncio.to_thread(thread.join)
        return answer, errors

    # a real loop: the answering thread takes real time, which a virtual timeout would skip
    answer, errors = clock.run(main(), virtual=False)
    assert answer == "yes"
    assert len(errors) == 1 and errors[0].endswith("is already answered")


#: What ``logging`` stamps on every record: clocks, ids and the line, never our content.
_STAMPED = frozenset({"created", "msecs", "relativeCreated", "thread", "process", "lineno"})


def test_logs_never_carry_secrets_numbers_or_question_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    v = _verifier(GUARDIAN, numbers=[GUARDIAN], pin="0420", passphrase="blue heron")
    v.check_turn("9999")
    v.check_turn("0420")
    _verifier(GUARDIAN, numbers=[GUARDIAN], pin="0420").check_dtmf("0420#")
    _verifier(GUARDIAN, numbers=[GUARDIAN])
    desk = GuardianDesk()
    q = desk.ask("call_1", "Is the alarm code 7781?")
    desk.answer(q.id, "yes it is 7781")
    assert caplog.records
    for record in caplog.records:
        # every field but the numbers logging stamps on each record itself (a
        # timestamp such as 26223.5264778137 holds "7781" by chance)
        fields = {k: v for k, v in vars(record).items() if k not in _STAMPED}
        logged = record.getMessage() + repr(fields)
        for secret in ("0420", "9999", "blue", GUARDIAN, "5551234567", "7781", "alarm"):
            assert secret not in logged
