"""The call controller's state machine, driven event by event (no asyncio)."""

from __future__ import annotations

from agent.controller.fsm import (
    CancelTimer,
    ControllerFSM,
    ControllerPolicy,
    EndCall,
    Greet,
    HangUpLine,
    StartTimer,
)
from agent.core.messages import (
    CallAnswered,
    CallNotAnswered,
    HangUp,
    RemoteHangup,
    TimerFired,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTurnCompleted,
)

C = "call_1"


def _fsm(direction: str = "outbound") -> ControllerFSM:
    return ControllerFSM(
        ControllerPolicy(
            direction=direction,
            greet_after_silence=2.0,
            max_call_seconds=60.0,
            opening_instructions="open",
            inbound_greeting_instructions="hello",
        )
    )


def test_outbound_waits_for_first_words_then_lets_the_session_reply() -> None:
    fsm = _fsm()
    cmds = fsm.on_event(CallAnswered(call_id=C))
    assert StartTimer("greet", 2.0) in cmds and StartTimer("max_call", 60.0) in cmds
    assert fsm.state == "listening"
    assert fsm.on_event(UserSpeechStarted(call_id=C)) == [CancelTimer("greet")]
    cmds = fsm.on_event(UserTurnCompleted(call_id=C, turn_id="turn_1", text="Hello?"))
    assert fsm.state == "conversing"
    assert not any(isinstance(c, Greet) for c in cmds)


def test_outbound_greets_after_silence() -> None:
    fsm = _fsm()
    fsm.on_event(CallAnswered(call_id=C))
    assert fsm.on_event(TimerFired(call_id=C, name="greet")) == [Greet("open")]
    assert fsm.state == "conversing"


def test_noise_without_a_turn_rearms_the_greeting() -> None:
    fsm = _fsm()
    fsm.on_event(CallAnswered(call_id=C))
    fsm.on_event(UserSpeechStarted(call_id=C))
    assert fsm.on_event(UserSpeechStopped(call_id=C)) == [StartTimer("greet", 2.0)]
    assert fsm.on_event(TimerFired(call_id=C, name="greet")) == [Greet("open")]


def test_a_late_greet_timer_after_the_conversation_started_does_nothing() -> None:
    fsm = _fsm()
    fsm.on_event(CallAnswered(call_id=C))
    fsm.on_event(UserTurnCompleted(call_id=C, turn_id="turn_1", text="Hi"))
    assert fsm.on_event(TimerFired(call_id=C, name="greet")) == []


def test_inbound_greets_first() -> None:
    fsm = _fsm("inbound")
    cmds = fsm.on_event(CallAnswered(call_id=C))
    assert Greet("hello") in cmds and fsm.state == "conversing"


def test_unanswered_statuses_map_to_dispositions() -> None:
    for status, disp in [
        ("busy", "busy"),
        ("no-answer", "no-answer"),
        ("failed", "failed"),
        ("rejected", "rejected"),
    ]:
        fsm = _fsm()
        cmds = fsm.on_event(CallNotAnswered(call_id=C, status=status))  # type: ignore[arg-type]
        assert EndCall(disp, f"not answered: {status}") in cmds  # type: ignore[arg-type]
        assert fsm.state == "ended"


def test_callee_hangup_completes_and_nothing_happens_after_the_end() -> None:
    fsm = _fsm()
    fsm.on_event(CallAnswered(call_id=C))
    cmds = fsm.on_event(RemoteHangup(call_id=C))
    assert cmds[-1] == EndCall("completed", "callee hung up")
    assert CancelTimer("max_call") in cmds
    assert fsm.on_event(TimerFired(call_id=C, name="max_call")) == []
    assert fsm.on_event(HangUp(call_id=C)) == []


def test_max_call_duration_hangs_up() -> None:
    fsm = _fsm()
    fsm.on_event(CallAnswered(call_id=C))
    cmds = fsm.on_event(TimerFired(call_id=C, name="max_call"))
    assert cmds[0] == HangUpLine("max call duration")
    assert cmds[-1] == EndCall("completed", "max call duration")


def test_agent_hangup_and_runtime_failure() -> None:
    fsm = _fsm()
    fsm.on_event(CallAnswered(call_id=C))
    cmds = fsm.on_event(HangUp(call_id=C, reason="agent ended the call"))
    assert cmds[0] == HangUpLine("agent ended the call")
    assert fsm.disposition == "completed"
    fsm2 = _fsm()
    fsm2.on_event(CallAnswered(call_id=C))
    cmds = fsm2.fail("actor session failed")
    assert cmds[-1] == EndCall("error", "actor session failed")
    assert fsm2.fail("again") == []
