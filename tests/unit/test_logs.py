"""Log lines: call and turn ids, JSON lines, and redaction of numbers, transcripts, digits."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from agent.app.logs import call_context, set_turn, setup_logging, turn_context
from tests.fakes.models import ScriptedLLM
from tests.unit.test_replay_calls import _call, _replay, _replayer

log = logging.getLogger("agent.test")
_LOGGERS = ("", "agent", "amd", "guardrails", "livekit", "livekit.agents")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALLRT_LOG_JSON", raising=False)
    monkeypatch.delenv("CALLRT_LOG_REDACT", raising=False)


@contextlib.contextmanager
def _logging_to(
    *, json_logs: bool = True, redact: bool = True, verbose: bool = True
) -> Iterator[io.StringIO]:
    """setup_logging into a buffer; the root handlers and logger levels are restored after.

    A context manager rather than a fixture: pytest swaps its own handlers on the root
    logger per test phase, so the state must be restored in the phase it was saved in.
    """
    root = logging.getLogger()
    handlers = root.handlers[:]
    levels = {name: logging.getLogger(name).level for name in _LOGGERS}
    buf = io.StringIO()
    try:
        setup_logging(verbose=verbose, json_logs=json_logs, redact=redact, stream=buf)
        yield buf
    finally:
        root.handlers[:] = handlers
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


async def test_records_inside_a_call_carry_its_id_also_in_tasks_created_there() -> None:
    async def in_task() -> None:
        log.info("from a task")

    with _logging_to() as buf:
        with call_context("call_a"):
            log.info("in the call")
            await asyncio.create_task(in_task())
            set_turn("turn_2")
            log.info("in a turn")
            with turn_context("turn_9"):
                log.info("in a task-local turn")
            log.info("explicit", extra={"call_id": "call_b", "turn_id": "turn_1"})
        log.info("after the call")
    got = [(d["msg"], d.get("call_id"), d.get("turn_id")) for d in _lines(buf)]
    assert got == [
        ("in the call", "call_a", None),
        ("from a task", "call_a", None),
        ("in a turn", "call_a", "turn_2"),
        ("in a task-local turn", "call_a", "turn_9"),
        ("explicit", "call_b", "turn_1"),
        ("after the call", None, None),
    ]


async def test_concurrent_calls_keep_their_own_ids_and_turns() -> None:
    async def call(call_id: str, turn: str) -> None:
        with call_context(call_id):
            set_turn(turn)
            await asyncio.sleep(0)
            log.info("tick")

    with _logging_to() as buf:
        await asyncio.gather(call("call_a", "turn_1"), call("call_b", "turn_7"))
    got = sorted((d["call_id"], d["turn_id"]) for d in _lines(buf))
    assert got == [("call_a", "turn_1"), ("call_b", "turn_7")]


def test_a_json_line_has_the_time_level_logger_message_fields_and_exception() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    with _logging_to() as buf:
        with call_context("call_a"):
            log.warning("odd %s", "thing", extra={"attempt": 2, "obj": Opaque(), "d": {(1, 2): 3}})
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("failed")
    first, second = _lines(buf)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert first["level"] == "warning" and first["logger"] == "agent.test"
    assert first["msg"] == "odd thing" and first["call_id"] == "call_a"
    assert first["attempt"] == 2 and first["obj"] == "<opaque>" and first["d"] == "{(1, 2): 3}"
    assert "ValueError: boom" in second["exc"] and second["level"] == "error"


def test_numbers_digits_and_transcripts_are_masked_in_fields_and_message_bodies() -> None:
    with _logging_to() as buf:
        log.info(
            "dialled +1 (555) 123-4567, account 12345678",
            extra={
                "number": "+15551234567",
                "caller": "not a number",
                "digits": "40172#",
                "transcript": "my pin is 4242",
                "lk.pii.user_transcript": "hello",
                "tool_gate": {"args": {"to": "+15551234567"}, "tool": "transfer"},
                "error": "rejected +44 20 7946 0958",
                "call_id": "call_1234567",
            },
        )
        try:
            raise ValueError("bad number +15551234567")
        except ValueError:
            log.exception("failed")
    line, failed = _lines(buf)
    assert line["msg"] == "dialled +1********67, account ***"
    assert line["number"] == "+1********67"
    assert line["caller"] == "*** (12 chars)"
    assert line["digits"] == "*** (6 chars)"
    assert line["transcript"] == "*** (14 chars)"
    assert line["lk.pii.user_transcript"] == "*** (5 chars)"
    assert line["tool_gate"] == {"args": "***", "tool": "transfer"}
    assert line["error"] == "rejected +4*********58"
    assert line["call_id"] == "call_1234567"
    assert "5551234567" not in failed["exc"] and "+1********67" in failed["exc"]


def test_redaction_off_shows_everything_and_says_so_once() -> None:
    with _logging_to(redact=False) as buf:
        log.info("dialled +15551234567", extra={"number": "+15551234567", "digits": "40172#"})
    warning, line = _lines(buf)
    assert warning["level"] == "warning" and "redaction is off" in warning["msg"]
    assert warning["turned_off_by"] == "redact=False"
    assert line["msg"] == "dialled +15551234567"
    assert line["number"] == "+15551234567" and line["digits"] == "40172#"


def test_environment_turns_redaction_off_and_json_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLRT_LOG_REDACT", "0")
    monkeypatch.setenv("CALLRT_LOG_JSON", "1")
    with _logging_to(json_logs=False, verbose=False) as buf:
        log.warning("typed", extra={"digits": "1234"})
    warning, line = _lines(buf)
    assert "redaction is off" in warning["msg"]
    assert warning["turned_off_by"] == "CALLRT_LOG_REDACT"
    assert line["digits"] == "1234"


def test_redaction_stays_on_for_any_other_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLRT_LOG_REDACT", "maybe")
    with _logging_to() as buf:
        log.warning("typed", extra={"digits": "1234"})
    (line,) = _lines(buf)
    assert line["digits"] == "*** (4 chars)"


def test_text_lines_show_the_call_and_turn() -> None:
    with _logging_to(json_logs=False) as buf:
        with call_context("call_a"), turn_context("turn_3"):
            log.info("ringing +15551234567")
        log.info("idle")
    assert buf.getvalue().splitlines() == [
        "INFO agent.test [call_a turn_3]: ringing +1********67",
        "INFO agent.test: idle",
    ]


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
def test_a_replayed_call_logs_only_lines_with_its_id_and_nothing_said_or_typed(
    level: int,
) -> None:
    # the callee types "40172#"; the agent reads out a phone number
    call = _call("inbound-keypad-entry")
    said = [c.say for c in call.callee if c.say]
    reply = "Sure, you can also call us back at +1 555 010 4477 any time."
    with _logging_to() as buf:
        for name in _LOGGERS[1:]:
            logging.getLogger(name).setLevel(level)
        (r,) = _replay([call], _replayer(ScriptedLLM([reply])))
    assert r.result.ok, r.result.failures
    call_id = r.messages[0].call_id  # type: ignore[attr-defined]
    lines = _lines(buf)
    assert lines and all(d["call_id"] == call_id for d in lines), lines
    text = buf.getvalue()
    for secret in [*said, "40172", "555 010 4477", "5550104477", reply]:
        assert secret not in text
    if level == logging.DEBUG:
        # livekit's own lines are tagged too, with the turn they belong to
        assert any(d["logger"].startswith("livekit") and d.get("turn_id") for d in lines)
