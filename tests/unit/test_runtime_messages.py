"""The message union: every kind round-trips through the adapter; messages are frozen."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, ValidationError

from agent.core.messages import URGENT_KINDS, Message, message_adapter

CALL = "call_test"

# One sample per kind, with every optional field set away from its default so
# a field lost in a round trip shows up.
SAMPLES: dict[str, dict[str, typing.Any]] = {
    "call_started": {"direction": "outbound"},
    "call_answered": {},
    "call_not_answered": {"status": "busy"},
    "remote_hangup": {},
    "call_ended": {"disposition": "voicemail", "reason": "left message"},
    "actor_crashed": {"actor": "session", "error": "RuntimeError('x')"},
    "model_failed": {"model": "stt", "error": "APIConnectionError"},
    "user_speech_started": {},
    "user_speech_stopped": {},
    "user_transcript": {"turn_id": "turn_1", "text": "hello", "final": True},
    "user_turn_completed": {
        "turn_id": "turn_1",
        "text": "hello",
        "started_at": 0.5,
        "context": {"channel": "voice", "caller_number": "+15551234567", "verified": True},
    },
    "turn_settled": {"turn_id": "turn_1", "run_id": "run_1", "outcome": "aborted", "text": ""},
    "transfer": {"target": "billing", "destination": "+15551234567"},
    "control_marker": {"run_id": "run_1", "marker": "transfer", "arg": "billing"},
    "call_transferred": {"target": "billing"},
    "caller_verified": {"method": "pin"},
    "guardian_question": {
        "question_id": "q_1",
        "status": "answered",
        "question": "ok?",
        "answer": "yes",
    },
    "tool_call_reviewed": {
        "gate_mode": "on",
        "values": {"destructive": 0.9},
        "run_id": "run_1",
        "tool": "cancel",
        "decision": "deny",
        "proposed": "ask",
        "would": "ask",
        "reason": "unverified_caller",
    },
    "watchdog_verdict": {
        "act": {"looping": 0.9},
        "logged": {},
        "source": "heuristic",
        "mode": "on",
        "interrupted_run": None,
    },
    "agent_speech_started": {"run_id": "run_1"},
    "turn_latency": {
        "turn_id": "turn_1",
        "run_id": "run_1",
        "clock": "wall",
        "preemptive": True,
        "audio_end": 10.0,
        "vad_end": 10.3,
        "stt_final": 10.4,
        "committed": 10.5,
        "llm_request": 10.4,
        "llm_first_token": 10.55,
        "first_sentence": 10.6,
        "tts_first_audio": 10.75,
        "first_audio": 10.8,
        "prompt_tokens": 240,
        "cached_tokens": 200,
    },
    "agent_sentence": {"run_id": "run_1", "index": 2, "text": "Hi there."},
    "agent_turn_completed": {
        "run_id": "run_1",
        "text": "Hi there.",
        "interrupted": True,
        "started_at": 2.5,
    },
    "playback_finished": {"run_id": None, "position": 1.25, "interrupted": False},
    "dtmf_received": {"digits": "12#"},
    "dtmf_sent": {"digits": "9"},
    "say": {"text": "Please hold.", "allow_interruptions": False},
    "generate_reply": {
        "instructions": "be brief",
        "user_input": "what time is it",
        "protect": True,
        "opening": False,
    },
    "interrupt_run": {"run_id": "run_1"},
    "send_dtmf": {"digits": "1"},
    "hang_up": {"reason": "voicemail", "graceful": True},
    "call_state_changed": {"old": "ringing", "new": "talking"},
    "timer_fired": {"name": "silence"},
    "amd_prediction": {
        "category": "machine-vm",
        "stage": "machine-vm",
        "final": True,
        "reason": "beep",
        "turn_id": "turn_1",
        "turn": 2,
        "confidence": 0.95,
        "transcript": "leave a message",
        "delay": 0.25,
        "evidence": ("beep", "phrase:leave a message"),
        "provisional": True,
        "changed": True,
        "asks": True,
    },
    "amd_completed": {
        "category": "machine-vm",
        "stages": ("machine-screening", "machine-vm"),
        "decided_at": 3.5,
        "reason": "beep",
    },
    "amd_tone": {"tone": "sit", "start": 1.0, "end": 1.5, "hz": (913.8, 1370.6, 1776.7)},
    "voicemail_left": {"run_id": "run_2"},
    "set_tools": {"end_call": False, "send_dtmf": True},
    "guardrail_check": {
        "hook": "on_agent_sentence",
        "text": "Hi there.",
        "turn_id": "turn_1",
        "run_id": "run_1",
        "index": 0,
    },
    "guardrail_evaluated": {
        "hook": "on_user_turn",
        "action": "steer",
        "decisions": {"toxicity": 0.25, "topic": "billing", "blocked": False},
        "errors": {"abuse": "timeout"},
        "latency": 0.125,
        "turn_id": "turn_1",
        "run_id": "run_1",
        "index": None,
        "eager": "ready",
        "end_call": False,
        "source": "decision",
    },
    "response_check": {"text": "Your card ends in 42.", "run_id": "speech_1", "user_text": "hi"},
}


def _members() -> list[type[BaseModel]]:
    union = typing.get_args(Message)[0]
    return list(typing.get_args(union))


def _kind(cls: type[BaseModel]) -> str:
    return typing.get_args(cls.model_fields["kind"].annotation)[0]


def _sample(kind: str) -> Message:
    return message_adapter.validate_python(
        {"kind": kind, "call_id": CALL, "at": 12.5, **SAMPLES[kind]}
    )


def test_every_kind_has_a_sample_and_kinds_are_unique() -> None:
    kinds = [_kind(cls) for cls in _members()]
    assert len(kinds) == len(set(kinds))
    assert set(kinds) == set(SAMPLES)
    assert URGENT_KINDS <= set(kinds)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_message_round_trips_through_the_adapter(kind: str) -> None:
    msg = _sample(kind)
    assert msg.kind == kind
    assert msg.call_id == CALL
    dumped = message_adapter.dump_python(msg)
    assert dumped == {"kind": kind, "call_id": CALL, "at": 12.5, **SAMPLES[kind]}
    again = message_adapter.validate_python(dumped)
    assert type(again) is type(msg) and again == msg
    from_json = message_adapter.validate_json(message_adapter.dump_json(msg))
    assert type(from_json) is type(msg) and from_json == msg


@pytest.mark.parametrize("cls", _members(), ids=_kind)
def test_every_message_requires_call_id_and_defaults_its_kind(cls: type[BaseModel]) -> None:
    assert cls.model_fields["call_id"].is_required()
    msg = cls(call_id=CALL, **SAMPLES[_kind(cls)])
    assert msg.kind == _kind(cls)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_messages_are_frozen(kind: str) -> None:
    msg = _sample(kind)
    with pytest.raises(ValidationError, match="frozen"):
        msg.call_id = "other"  # type: ignore[misc]
    assert msg.call_id == CALL


def test_unknown_kinds_and_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        message_adapter.validate_python({"kind": "nope", "call_id": CALL})
    with pytest.raises(ValidationError):
        message_adapter.validate_python({"kind": "say", "call_id": CALL, "text": "x", "volume": 3})
    with pytest.raises(ValidationError):
        message_adapter.validate_python({"kind": "say", "text": "x"})


def test_turn_latency_stages_charge_only_the_critical_path() -> None:
    msg = _sample("turn_latency")
    stages = msg.stages()
    # the preemptive LLM request (10.4) came before the commit (10.5): it added nothing
    assert stages["llm_request"] == 0.0
    assert stages["endpointing"] == pytest.approx(0.1)
    assert stages["llm_first_token"] == pytest.approx(0.05)
    assert stages["tts"] == pytest.approx(0.15)
    assert sum(stages.values()) == pytest.approx(msg.total()) == pytest.approx(0.8)


def test_turn_latency_without_audio_end_starts_at_the_vad() -> None:
    msg = _sample("turn_latency").model_copy(update={"audio_end": None})
    assert msg.origin() == 10.3
    assert msg.stages()["vad"] == 0.0
    assert msg.total() == pytest.approx(0.5)
