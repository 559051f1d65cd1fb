"""The call controller with AMD on: who is talked to, what is said, when, and how calls end."""

from __future__ import annotations

from typing import Any

import pytest

from agent.controller.fsm import (
    CancelTimer,
    Command,
    ControllerFSM,
    ControllerPolicy,
    EndCall,
    Gate,
    Greet,
    HangUpLine,
    Interrupt,
    MessageLeft,
    PressKeys,
    Speak,
    StartTimer,
    Tools,
)
from agent.core.messages import (
    AgentSpeechStarted,
    AgentTurnCompleted,
    AmdCompleted,
    AmdPrediction,
    AmdTone,
    CallAnswered,
    RemoteHangup,
    TimerFired,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTurnCompleted,
)

C = "call_1"
MENU = "For appointments, press 1. For billing, press 2. To speak with a representative, press 0."


def _fsm(**overrides: Any) -> ControllerFSM:
    policy: dict[str, Any] = {
        "amd": True,
        "max_call_seconds": 300.0,
        "opening_instructions": "open",
        "screening_reply": "Sam from Acme, about your appointment.",
        "voicemail_message": "Please call Acme back.",
        "ivr_goal": "billing",
    }
    policy.update(overrides)
    fsm = ControllerFSM(ControllerPolicy(**policy))
    fsm.on_event(CallAnswered(call_id=C, at=0.0))
    return fsm


def _pred(at: float, stage: str, category: str | None = None, **kw: Any) -> AmdPrediction:
    return AmdPrediction(call_id=C, at=at, category=category or stage, stage=stage, **kw)  # type: ignore[arg-type]


def _speech(fsm: ControllerFSM, start: float, stop: float) -> list[Command]:
    return [
        *fsm.on_event(UserSpeechStarted(call_id=C, at=start)),
        *fsm.on_event(UserSpeechStopped(call_id=C, at=stop)),
    ]


def _timer(fsm: ControllerFSM, at: float, name: str) -> list[Command]:
    return fsm.on_event(TimerFired(call_id=C, at=at, name=name))


def _timers(cmds: list[Command]) -> dict[str, float]:
    return {c.name: c.seconds for c in cmds if isinstance(c, StartTimer)}


def _of(cmds: list[Command], kind: type) -> list[Any]:
    return [c for c in cmds if isinstance(c, kind)]


def _conversing(fsm: ControllerFSM, run: str = "run_open") -> None:
    """A provisional person at 1.5 and the opening reply speaking."""
    _speech(fsm, 0.5, 1.0)
    fsm.on_event(_pred(1.5, "human", provisional=True, changed=True))
    fsm.spoke("opening", run)
    fsm.on_event(AgentSpeechStarted(call_id=C, at=2.2, run_id=run))
    assert fsm.state == "conversing"


def _voicemail(fsm: ControllerFSM) -> None:
    """A voicemail greeting from 0.5 to 4.0, predicted at 4.0."""
    _speech(fsm, 0.5, 4.0)
    fsm.on_event(_pred(4.0, "machine-vm", asks=True, changed=True))
    assert fsm.state == "voicemail"


def _message_left(fsm: ControllerFSM) -> None:
    """The voicemail message played from 5.5 to 9.0, uninterrupted."""
    _voicemail(fsm)
    _timer(fsm, 5.5, "vm_message")
    fsm.spoke("voicemail", "run_vm")
    done = AgentTurnCompleted(call_id=C, at=9.0, run_id="run_vm", text="x", interrupted=False)
    assert _of(fsm.on_event(done), MessageLeft) == [MessageLeft("run_vm")]
    assert fsm.state == "after_message"


# -- listening and a person --------------------------------------------------------------


def test_answer_closes_the_gate_hides_end_call_and_arms_no_greeting() -> None:
    fsm = ControllerFSM(ControllerPolicy(amd=True, max_call_seconds=300.0))
    cmds = fsm.on_event(CallAnswered(call_id=C, at=0.0))
    assert cmds == [StartTimer("max_call", 300.0), Gate(False), Tools(end_call=False)]
    assert fsm.state == "listening"
    # speech that made no turn does not start the old greet-after-silence timer
    assert _timers(_speech(fsm, 0.5, 1.0)) == {}
    assert fsm.on_event(UserTurnCompleted(call_id=C, at=1.2, turn_id="t1", text="Hm")) == []
    assert fsm.state == "listening"


def test_provisional_person_opens_the_gate_restores_end_call_and_greets() -> None:
    fsm = _fsm()
    _speech(fsm, 0.5, 1.0)
    cmds = fsm.on_event(_pred(1.5, "human", provisional=True, changed=True))
    assert Gate(True) in cmds
    assert Tools(end_call=True, send_dtmf=False) in cmds
    assert _of(cmds, Greet) == [Greet("open")]
    assert fsm.state == "conversing"
    fsm.spoke("opening", "run_open")
    # the opening reply ends: automatic replies stay open while conversing
    done = AgentTurnCompleted(call_id=C, at=4.0, run_id="run_open", text="Hi", interrupted=False)
    assert fsm.on_event(done) == [Gate(True)]
    # the confirmation changes nothing
    assert fsm.on_event(AmdCompleted(call_id=C, at=7.5, category="human")) == []
    assert fsm.on_event(_pred(8.0, "human")) == []


def test_person_after_a_menu_starts_the_conversation() -> None:
    fsm = _fsm()
    _speech(fsm, 0.5, 4.0)
    fsm.on_event(_pred(4.0, "machine-ivr", transcript=MENU, asks=True))
    cmds = fsm.on_event(_pred(9.0, "human", changed=True))
    assert CancelTimer("machine_reply") in cmds
    assert _of(cmds, Greet) == [Greet("open")] and Gate(True) in cmds
    assert fsm.state == "conversing"
    assert _timer(fsm, 10.0, "machine_reply") == []  # a stale timer presses nothing


# -- screening -----------------------------------------------------------------------------


def test_screener_is_answered_after_a_silence_that_restarts_when_it_speaks() -> None:
    fsm = _fsm()
    _speech(fsm, 0.5, 3.0)
    cmds = fsm.on_event(_pred(3.0, "machine-screening", asks=True, changed=True))
    assert _timers(cmds) == {"machine_reply": pytest.approx(1.5)}
    assert fsm.state == "screening"
    assert not _of(cmds, Greet) and not _of(cmds, Speak)
    assert fsm.on_event(UserSpeechStarted(call_id=C, at=3.8)) == [CancelTimer("machine_reply")]
    stop = fsm.on_event(UserSpeechStopped(call_id=C, at=4.6))
    assert _timers(stop) == {"machine_reply": pytest.approx(1.5)}
    assert _timer(fsm, 6.1, "machine_reply") == [
        Speak("Sam from Acme, about your appointment.", "screening")
    ]


def test_screening_silence_is_measured_from_the_end_of_speech() -> None:
    fsm = _fsm()
    _speech(fsm, 0.5, 3.0)
    cmds = fsm.on_event(_pred(3.6, "machine-screening", asks=True, changed=True))
    assert _timers(cmds) == {"machine_reply": pytest.approx(0.9)}


def test_screening_without_a_question_waits_quietly() -> None:
    fsm = _fsm()
    _speech(fsm, 0.5, 3.0)
    cmds = fsm.on_event(_pred(3.0, "machine-screening", asks=False, changed=True))
    assert _timers(cmds) == {} and fsm.state == "screening"


def test_screener_gets_at_most_max_screening_replies() -> None:
    fsm = _fsm(max_screening_replies=2)
    spoken = []
    for i in range(3):
        t = 10.0 * i
        _speech(fsm, t + 0.5, t + 3.0)
        cmds = fsm.on_event(_pred(t + 3.0, "machine-screening", asks=True))
        cmds += _timer(fsm, t + 4.5, "machine_reply")
        spoken += _of(cmds, Speak)
    assert [s.tag for s in spoken] == ["screening", "screening"]
    assert fsm.screening_replies == 2


# -- IVR -------------------------------------------------------------------------------------


def test_menu_is_answered_with_the_goal_digit_after_silence() -> None:
    fsm = _fsm(ivr_goal="billing")
    _speech(fsm, 0.5, 6.0)
    cmds = fsm.on_event(_pred(6.2, "machine-ivr", transcript=MENU, asks=True, changed=True))
    assert fsm.state == "ivr"
    assert _timers(cmds) == {"machine_reply": pytest.approx(1.3)}
    assert not _of(cmds, PressKeys)
    assert _timer(fsm, 7.5, "machine_reply") == [PressKeys("2")]


def test_menu_split_over_turns_is_read_as_one() -> None:
    fsm = _fsm(ivr_goal="billing")
    _speech(fsm, 0.5, 3.0)
    fsm.on_event(_pred(3.0, "machine-ivr", transcript="For appointments, press 1.", asks=True))
    _speech(fsm, 3.3, 5.0)
    fsm.on_event(_pred(5.0, "machine-ivr", transcript="For billing, press 2.", asks=True))
    assert _timer(fsm, 6.5, "machine_reply") == [PressKeys("2")]


def test_menu_without_a_goal_reaches_a_person() -> None:
    fsm = _fsm(ivr_goal="")
    _speech(fsm, 0.5, 6.0)
    fsm.on_event(_pred(6.0, "machine-ivr", transcript=MENU, asks=True))
    assert _timer(fsm, 7.5, "machine_reply") == [PressKeys("0")]


def test_menu_with_nothing_that_fits_waits_or_hands_over_to_the_llm() -> None:
    menu = "For store hours, press 1. For directions, press 2."
    fsm = _fsm(ivr_fallback="wait")
    _speech(fsm, 0.5, 4.0)
    fsm.on_event(_pred(4.0, "machine-ivr", transcript=menu, asks=True))
    assert _timer(fsm, 5.5, "machine_reply") == []

    fsm = _fsm(ivr_fallback="llm")
    _speech(fsm, 0.5, 4.0)
    fsm.on_event(_pred(4.0, "machine-ivr", transcript=menu, asks=True))
    cmds = _timer(fsm, 5.5, "machine_reply")
    assert Tools(end_call=False, send_dtmf=True) in cmds
    (greet,) = _of(cmds, Greet)
    assert not greet.opening and "billing" in greet.instructions


def test_a_repeating_menu_is_answered_at_most_max_ivr_attempts_times() -> None:
    fsm = _fsm(max_ivr_attempts=3)
    pressed = []
    for i in range(5):
        t = 10.0 * i
        _speech(fsm, t + 0.5, t + 6.0)
        fsm.on_event(_pred(t + 6.0, "machine-ivr", transcript=MENU, asks=True))
        pressed += _of(_timer(fsm, t + 7.5, "machine_reply"), PressKeys)
    assert len(pressed) == 3


# -- voicemail -------------------------------------------------------------------------------


def test_voicemail_without_a_beep_speaks_after_silence_from_the_last_speech_stop() -> None:
    fsm = _fsm(vm_silence_without_beep=1.5)
    _speech(fsm, 0.5, 4.0)
    cmds = fsm.on_event(_pred(4.2, "machine-vm", asks=True, changed=True))
    assert fsm.state == "voicemail"
    assert _timers(cmds) == {"vm_message": pytest.approx(1.3)}
    assert not _of(cmds, Speak)
    # the greeting goes on: the timer restarts from its end
    assert fsm.on_event(UserSpeechStarted(call_id=C, at=4.5)) == [CancelTimer("vm_message")]
    assert _timers(fsm.on_event(UserSpeechStopped(call_id=C, at=6.0))) == {
        "vm_message": pytest.approx(1.5)
    }


def test_voicemail_predicted_mid_greeting_waits_for_its_end() -> None:
    fsm = _fsm()
    fsm.on_event(UserSpeechStarted(call_id=C, at=0.5))
    assert _timers(fsm.on_event(_pred(2.0, "machine-vm", changed=True))) == {}
    stop = fsm.on_event(UserSpeechStopped(call_id=C, at=4.0))
    assert _timers(stop) == {"vm_message": pytest.approx(1.5)}


def test_beep_while_waiting_starts_the_message_a_gap_after_the_beep_end() -> None:
    fsm = _fsm(beep_gap=0.15)
    _voicemail(fsm)
    beep = AmdTone(call_id=C, at=5.05, tone="beep", start=4.5, end=5.0)
    assert _timers(fsm.on_event(beep)) == {"vm_message": pytest.approx(0.1)}


def test_beep_heard_before_the_prediction_is_used_by_it() -> None:
    fsm = _fsm(beep_gap=0.15)
    _speech(fsm, 0.5, 4.0)
    assert fsm.on_event(AmdTone(call_id=C, at=4.6, tone="beep", start=4.2, end=4.5)) == []
    cmds = fsm.on_event(_pred(4.6, "machine-vm", evidence=("beep",), changed=True))
    assert _timers(cmds) == {"vm_message": pytest.approx(0.05)}


def test_message_is_played_uninterruptible_and_counted_only_after_playout() -> None:
    fsm = _fsm()
    _voicemail(fsm)
    cmds = _timer(fsm, 5.5, "vm_message")
    assert cmds == [Speak("Please call Acme back.", tag="voicemail", interruptible=False)]
    assert fsm.state == "leaving_message"
    fsm.spoke("voicemail", "run_vm")
    assert fsm.on_event(AgentSpeechStarted(call_id=C, at=5.7, run_id="run_vm")) == []
    done = AgentTurnCompleted(call_id=C, at=9.0, run_id="run_vm", text="x", interrupted=False)
    cmds = fsm.on_event(done)
    assert cmds == [MessageLeft("run_vm"), StartTimer("post_message", 10.0)]
    assert fsm.state == "after_message"
    cmds = _timer(fsm, 19.0, "post_message")
    assert cmds[0] == HangUpLine("voicemail left")
    assert cmds[-1] == EndCall("voicemail", "voicemail left")
    assert fsm.state == "ended"


def test_interrupted_message_is_not_left_and_the_controller_waits_again() -> None:
    fsm = _fsm()
    _voicemail(fsm)
    _timer(fsm, 5.5, "vm_message")
    fsm.spoke("voicemail", "run_vm")
    cut = AgentTurnCompleted(call_id=C, at=6.5, run_id="run_vm", text="x", interrupted=True)
    cmds = fsm.on_event(cut)
    assert not _of(cmds, MessageLeft)
    assert "vm_message" in _timers(cmds)
    assert fsm.state == "voicemail"
    assert fsm.on_event(RemoteHangup(call_id=C, at=7.0))[-1].disposition == "completed"


def test_hangup_after_the_message_is_a_voicemail_disposition() -> None:
    fsm = _fsm()
    _message_left(fsm)
    cmds = fsm.on_event(RemoteHangup(call_id=C, at=10.0))
    assert cmds[-1] == EndCall("voicemail", "callee hung up")


def test_late_beep_cuts_the_message_and_starts_it_again_after_the_beep() -> None:
    fsm = _fsm(beep_gap=0.15)
    _voicemail(fsm)
    _timer(fsm, 5.5, "vm_message")
    fsm.spoke("voicemail", "run_vm")
    cmds = fsm.on_event(AmdTone(call_id=C, at=6.3, tone="beep", start=5.8, end=6.2))
    assert cmds[0] == Interrupt("run_vm")
    assert _timers(cmds) == {"vm_message": pytest.approx(0.05)}
    assert fsm.state == "voicemail"
    cut = AgentTurnCompleted(call_id=C, at=6.4, run_id="run_vm", text="x", interrupted=True)
    assert not _of(fsm.on_event(cut), MessageLeft)
    assert _of(_timer(fsm, 6.35, "vm_message"), Speak)


def test_post_message_menu_sends_the_message() -> None:
    fsm = _fsm()
    _message_left(fsm)
    _speech(fsm, 10.0, 13.0)
    menu = "To send this message, press 1. To re-record, press 3."
    cmds = fsm.on_event(UserTurnCompleted(call_id=C, at=13.0, turn_id="t9", text=menu))
    assert _timers(cmds) == {"machine_reply": pytest.approx(1.5)}
    assert _timer(fsm, 14.5, "machine_reply") == [
        PressKeys("1"),
        StartTimer("post_message", 10.0),
    ]


def test_post_message_menu_without_a_send_option_presses_nothing() -> None:
    fsm = _fsm()
    _message_left(fsm)
    _speech(fsm, 10.0, 13.0)
    menu = "To re-record your message, press 1. To speak with an operator, press 0."
    fsm.on_event(UserTurnCompleted(call_id=C, at=13.0, turn_id="t9", text=menu))
    assert _of(_timer(fsm, 14.5, "machine_reply"), PressKeys) == []


# -- unavailable, corrections and AMD completion ------------------------------------------


def test_unavailable_hangs_up_with_that_disposition() -> None:
    fsm = _fsm()
    cmds = fsm.on_event(_pred(1.5, "machine-unavailable", reason="tone: sit", changed=True))
    assert cmds[0] == HangUpLine("unavailable")
    assert cmds[-1] == EndCall("unavailable", "tone: sit")
    assert fsm.state == "ended" and fsm.disposition == "unavailable"


def test_unavailable_while_conversing_hangs_up_too() -> None:
    fsm = _fsm()
    _conversing(fsm)
    cmds = fsm.on_event(_pred(4.0, "machine-unavailable", changed=True))
    assert cmds[-1].disposition == "unavailable"


def test_correction_to_voicemail_interrupts_the_agent_and_closes_the_gate() -> None:
    fsm = _fsm()
    _conversing(fsm, "run_open")
    cmds = fsm.on_event(_pred(4.0, "machine-vm", asks=True, changed=True))
    assert Interrupt("run_open") in cmds
    assert Gate(False) in cmds
    assert Tools(end_call=False) in cmds
    assert not _of(cmds, Greet)
    assert fsm.state == "voicemail"
    cut = AgentTurnCompleted(call_id=C, at=4.1, run_id="run_open", text="Hi", interrupted=True)
    assert Gate(False) in fsm.on_event(cut)  # the ended opening does not reopen the gate


def test_correction_before_the_opening_speaks_still_stops_the_opening() -> None:
    fsm = _fsm()
    _speech(fsm, 0.5, 1.0)
    fsm.on_event(_pred(1.5, "human", provisional=True, changed=True))
    fsm.spoke("opening", "run_open")  # the LLM is still thinking
    cmds = fsm.on_event(_pred(2.0, "machine-vm", evidence=("beep",), changed=True))
    cmds += fsm.on_event(AgentSpeechStarted(call_id=C, at=2.4, run_id="run_open"))
    assert Interrupt("run_open") in cmds


def test_prediction_that_does_not_change_the_stage_leaves_the_conversation_alone() -> None:
    fsm = _fsm()
    _conversing(fsm)
    # a recording talking over the agent while the person is provisional
    cmds = fsm.on_event(_pred(3.0, "human", category="machine-ivr", provisional=True))
    assert cmds == []
    assert fsm.on_event(_pred(3.5, "machine-ivr", changed=False)) == []
    assert fsm.state == "conversing"


def test_uncertain_completion_greets_by_default() -> None:
    fsm = _fsm()
    cmds = fsm.on_event(AmdCompleted(call_id=C, at=10.0, category="uncertain", reason="no speech"))
    assert _of(cmds, Greet) == [Greet("open")]
    assert Gate(True) in cmds and Tools(end_call=True) in cmds
    assert fsm.state == "conversing"


def test_uncertain_completion_hangs_up_when_configured() -> None:
    fsm = _fsm(uncertain_action="hangup")
    cmds = fsm.on_event(AmdCompleted(call_id=C, at=10.0, category="uncertain", reason="no speech"))
    assert not _of(cmds, Greet)
    assert cmds[0] == HangUpLine("amd uncertain")
    assert cmds[-1] == EndCall("completed", "amd uncertain")


def test_hard_timeout_in_voicemail_leaves_the_message_and_in_a_menu_hangs_up() -> None:
    fsm = _fsm()
    _voicemail(fsm)
    fsm.on_event(UserSpeechStarted(call_id=C, at=5.0))  # music that never stops
    cmds = fsm.on_event(
        AmdCompleted(call_id=C, at=120.0, category="machine-vm", reason="hard timeout")
    )
    assert cmds == [Speak("Please call Acme back.", tag="voicemail", interruptible=False)]

    fsm = _fsm()
    _speech(fsm, 0.5, 6.0)
    fsm.on_event(_pred(6.0, "machine-ivr", transcript="Please hold.", asks=False))
    cmds = fsm.on_event(
        AmdCompleted(call_id=C, at=120.0, category="machine-ivr", reason="hard timeout")
    )
    assert cmds[0] == HangUpLine("amd hard timeout")
    assert cmds[-1] == EndCall("completed", "amd hard timeout")


# -- AMD off ---------------------------------------------------------------------------------


def test_without_amd_the_controller_greets_after_silence_and_ignores_predictions() -> None:
    fsm = ControllerFSM(
        ControllerPolicy(amd=False, greet_after_silence=2.0, opening_instructions="open")
    )
    cmds = fsm.on_event(CallAnswered(call_id=C, at=0.0))
    assert StartTimer("greet", 2.0) in cmds
    assert not _of(cmds, Gate) and not _of(cmds, Tools)
    assert fsm.on_event(_pred(1.0, "machine-vm", changed=True)) == []
    assert fsm.on_event(AmdCompleted(call_id=C, at=1.0, category="uncertain")) == []
    assert fsm.on_event(AmdTone(call_id=C, at=1.0, tone="beep", start=0.5, end=0.9)) == []
    assert _speech(fsm, 1.0, 1.5) == [CancelTimer("greet"), StartTimer("greet", 2.0)]
    assert _timer(fsm, 3.5, "greet") == [Greet("open")]
    assert fsm.state == "conversing"
