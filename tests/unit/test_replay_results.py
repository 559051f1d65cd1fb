"""Replay results: the JSON Lines record of RECORDED_CALLS.md and evaluation of ``expect``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from agent.replay.results import (
    AmdResult,
    CallResult,
    Failure,
    GuardrailEvaluation,
    Turn,
    collapse_stages,
    evaluate,
    judge,
)
from agent.telephony.sim.recorded_call import RecordedCall

# The example record of RECORDED_CALLS.md, keys in the documented order.
DOC_EXAMPLE = """
{"name": "vm-dana-beep", "ok": true,
 "amd": {"category": "machine-vm", "stages": ["machine-vm"],
         "decided_at": 4.71, "reason": "prediction"},
 "disposition": "voicemail", "voicemail_left": true, "dtmf_sent": "",
 "duration": 14.2, "agent_first_audio_at": 5.9,
 "turns": [{"role": "callee", "start": 0.6, "end": 3.9, "text": "..."},
           {"role": "agent", "start": 5.9, "end": 11.0, "text": "...",
            "interrupted": false}],
 "guardrail": [{"hook": "on_user_turn", "at": 2.1, "action": "steer",
                "decisions": {"resolved": 0.2}, "latency": 0.004}],
 "failures": []}
"""


def _keys(value: Any) -> Any:
    """The nested key structure of a JSON value, in order."""
    if isinstance(value, dict):
        return [(key, _keys(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_keys(item) for item in value]
    return None


def _example_result() -> CallResult:
    return CallResult(
        name="vm-dana-beep",
        amd=AmdResult(
            category="machine-vm", stages=["machine-vm"], decided_at=4.71, reason="prediction"
        ),
        disposition="voicemail",
        voicemail_left=True,
        duration=14.2,
        agent_first_audio_at=5.9,
        turns=[
            Turn(role="callee", start=0.6, end=3.9, text="..."),
            Turn(role="agent", start=5.9, end=11.0, text="..."),
        ],
        guardrail=[
            GuardrailEvaluation(
                hook="on_user_turn",
                at=2.1,
                action="steer",
                decisions={"resolved": 0.2},
                latency=0.004,
            )
        ],
    )


def test_json_line_matches_the_documented_example_exactly() -> None:
    expected = json.loads(DOC_EXAMPLE)

    line = _example_result().to_json_line()

    assert "\n" not in line
    assert json.loads(line) == expected
    assert _keys(json.loads(line)) == _keys(expected)
    assert line == json.dumps(expected, separators=(",", ":"))


def test_json_line_round_trips() -> None:
    result = _example_result()

    assert CallResult.model_validate_json(result.to_json_line()) == result


def test_callee_turns_have_no_interrupted_key_and_agent_turns_always_do() -> None:
    callee = Turn(role="callee", start=0.0, end=1.0, text="Hello?")
    agent = Turn(role="agent", start=1.5, end=3.0, text="Hi, this is Ava.")

    assert "interrupted" not in callee.model_dump()
    assert agent.model_dump()["interrupted"] is False
    with pytest.raises(ValidationError, match="callee turns have no 'interrupted'"):
        Turn(role="callee", start=0.0, end=1.0, text="Hello?", interrupted=True)


def test_floats_are_rounded_to_three_decimals_and_booleans_kept() -> None:
    result = CallResult(
        name="x",
        disposition="completed",
        duration=14.23456,
        agent_first_audio_at=5.0004,
        guardrail=[
            GuardrailEvaluation(
                hook="on_agent_sentence",
                at=2.0,
                action="allow",
                decisions={"off_policy": 0.123456, "topic": "billing", "risky": False},
                latency=0.0041,
            )
        ],
    )

    data = json.loads(result.to_json_line())

    assert (data["duration"], data["agent_first_audio_at"]) == (14.235, 5.0)
    assert data["guardrail"][0]["decisions"] == {
        "off_policy": 0.123,
        "topic": "billing",
        "risky": False,
    }
    assert data["guardrail"][0]["latency"] == 0.004


def test_never_answered_call_has_null_amd() -> None:
    line = CallResult(name="busy", disposition="busy", duration=2.0).to_json_line()

    assert json.loads(line)["amd"] is None
    with pytest.raises(ValidationError, match="amd must be null"):
        CallResult(name="busy", disposition="busy", duration=2.0, amd=AmdResult(category="human"))


def test_ok_agrees_with_failures() -> None:
    with pytest.raises(ValidationError, match="ok must be true exactly when"):
        CallResult(
            name="x",
            disposition="completed",
            duration=1.0,
            failures=[Failure(key="disposition", expected="voicemail", actual="completed")],
        )


def _call(expect: dict[str, Any]) -> RecordedCall:
    return RecordedCall.model_validate(
        {"name": "x", "callee": [{"at": 0.5, "say": "Hi"}], "expect": expect}
    )


FULL_EXPECT = {
    "amd": "machine-ivr",
    "amd_stages": ["machine-screening", "machine-ivr"],
    "voicemail_left": False,
    "dtmf": "21",
    "disposition": "completed",
    "guardrail": {"blocked_user_turns": 2, "steered_user_turns": 0, "blocked_agent_sentences": 1},
}


def _guardrail(*entries: tuple[str, str]) -> list[GuardrailEvaluation]:
    return [
        GuardrailEvaluation(hook=hook, at=float(i), action=action)  # type: ignore[arg-type]
        for i, (hook, action) in enumerate(entries)
    ]


def test_evaluate_passes_when_everything_expected_happened() -> None:
    observed = CallResult(
        name="x",
        amd=AmdResult(
            category="machine-ivr",
            stages=["wait", "machine-screening", "machine-screening", "wait", "machine-ivr"],
        ),
        disposition="completed",
        dtmf_sent="21",
        duration=30.0,
        guardrail=_guardrail(
            ("on_user_turn", "block"),
            ("on_user_turn", "allow"),
            ("on_user_turn", "block"),
            ("on_agent_sentence", "block"),
            ("on_agent_turn", "allow"),
        ),
    )

    assert evaluate(_call(FULL_EXPECT), observed) == []
    assert judge(_call(FULL_EXPECT), observed).ok


def test_evaluate_reports_each_unmet_key_with_expected_and_actual() -> None:
    observed = CallResult(
        name="x",
        amd=AmdResult(category="human", stages=["human"]),
        disposition="voicemail",
        voicemail_left=True,
        dtmf_sent="12",
        duration=30.0,
        guardrail=_guardrail(("on_user_turn", "steer"), ("on_agent_sentence", "allow")),
    )

    failures = evaluate(_call(FULL_EXPECT), observed)

    assert [(f.key, f.expected, f.actual) for f in failures] == [
        ("amd", "machine-ivr", "human"),
        ("amd_stages", ["machine-screening", "machine-ivr"], ["human"]),
        ("voicemail_left", False, True),
        ("dtmf", "21", "12"),
        ("disposition", "completed", "voicemail"),
        ("guardrail.blocked_user_turns", 2, 0),
        ("guardrail.steered_user_turns", 0, 1),
        ("guardrail.blocked_agent_sentences", 1, 0),
    ]


def test_missing_amd_result_fails_amd_expectations_with_null() -> None:
    observed = CallResult(name="x", disposition="error", duration=1.0)

    failures = evaluate(_call({"amd": "human", "amd_stages": ["human"]}), observed)

    assert [(f.key, f.actual) for f in failures] == [("amd", None), ("amd_stages", None)]


def test_unset_expect_keys_are_not_checked() -> None:
    observed = CallResult(name="x", disposition="error", duration=1.0, dtmf_sent="9")

    assert evaluate(_call({}), observed) == []
    assert evaluate(_call({"dtmf": ""}), observed) == [Failure(key="dtmf", expected="", actual="9")]


def test_judge_fills_ok_and_failures_and_serialises_them() -> None:
    observed = CallResult(name="x", disposition="completed", duration=3.0)

    judged = judge(_call({"disposition": "voicemail"}), observed)

    assert not judged.ok
    assert json.loads(judged.to_json_line())["failures"] == [
        {"key": "disposition", "expected": "voicemail", "actual": "completed"}
    ]


def test_collapse_stages_drops_wait_and_repeats() -> None:
    stages = ["wait", "machine-vm", "machine-vm", "wait", "machine-vm", "human"]

    assert collapse_stages(stages) == ["machine-vm", "human"]
