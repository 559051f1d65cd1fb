"""The tool gate and the watchdog inside a running call (virtual clock, scripted models)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from agent.app.call import ModelSet
from agent.app.chat import ChatSession
from agent.app.config import AgentConfig
from agent.core import clock
from agent.models.estimate_tts import EstimateTTS
from agent.models.script_llm import ScriptLLM
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT
from guardrails.watchdog import REMINDERS
from tests.fakes.models import ScriptedDecisionModel, ScriptedLLM
from tests.unit.test_replay_calls import _inline

CANCELLED: list[str] = []
GUARDIAN = "+15550100999"


async def cancel_appointment(appointment_id: str) -> str:
    """Cancel one of the caller's appointments.

    Args:
        appointment_id: The appointment to cancel.
    """
    CANCELLED.append(appointment_id)
    return f"Appointment {appointment_id} is cancelled."


SCRIPT = """
replies:
  - when: 'CALL_OPENING'
    say: "Hello, this is Sam from Acme Dental."
  - when: 'cancel'
    say: "Let me do that."
    tool: {name: cancel_appointment, arguments: {appointment_id: "A1"}}
after_tool:
  - when: 'cancel_appointment'
    say: "{result}"
default: "Okay."
"""


def _models(llm: Any, **kw: Any) -> ModelSet:
    return ModelSet(
        stt=TranscriptFeedSTT(),
        llm=llm,
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
        **kw,
    )


def _gate_call(tmp_path: Path, mode: str) -> tuple[list[Any], list[str]]:
    script = tmp_path / "replies.yaml"
    script.write_text(SCRIPT)
    config = AgentConfig(
        tools=[{"function": "tests.unit.test_controls_session:cancel_appointment"}],
        guardian={"numbers": [GUARDIAN]},  # caller id alone verifies this caller
        tool_gate={"mode": mode},
        task="confirm tomorrow's appointment time",
    )
    CANCELLED.clear()

    async def main() -> list[Any]:
        chat = ChatSession(
            config,
            _models(ScriptLLM.from_file(script)),
            channel="voice",
            caller_number=GUARDIAN,
        )
        await chat.start()
        reply = await chat.send("Please cancel my appointment.")
        await chat.close()
        return [*chat.messages, reply]

    out = clock.run(main())
    return out, list(CANCELLED)


def test_the_tool_gate_turns_a_destructive_call_into_a_confirmation(tmp_path: Path) -> None:
    messages, cancelled = _gate_call(tmp_path, "on")
    (review,) = [m for m in messages if getattr(m, "kind", "") == "tool_call_reviewed"]
    assert review.proposed == "allow" and review.decision == "ask"
    assert review.reason == "confirm_aloud" and review.values["destructive"] >= 0.7
    assert cancelled == []  # nothing ran: the verified caller is asked to confirm aloud


def test_the_tool_gate_in_shadow_mode_changes_nothing_but_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.app.call")
    messages, cancelled = _gate_call(tmp_path, "shadow")
    (review,) = [m for m in messages if getattr(m, "kind", "") == "tool_call_reviewed"]
    assert review.decision == "allow" and review.would == "ask" and review.gate_mode == "shadow"
    assert cancelled == ["A1"]  # it ran, as without the gate
    assert messages[-1].text == "Let me do that. Appointment A1 is cancelled."
    logged = [r.tool_gate for r in caplog.records if hasattr(r, "tool_gate")]
    assert [e["event"] for e in logged] == ["tool_gate_shadow"]
    assert logged[0]["would"] == "ask" and "A1" not in str(logged[0])


def test_with_the_gate_off_the_same_call_just_runs(tmp_path: Path) -> None:
    messages, cancelled = _gate_call(tmp_path, "off")
    (review,) = [m for m in messages if getattr(m, "kind", "") == "tool_call_reviewed"]
    assert review.decision == "allow" and review.gate_mode == "off"
    assert cancelled == ["A1"]


# -- the watchdog ------------------------------------------------------------------------

LOOP = "I can help you with that, I can help you with that, let me help you with that today."


def test_the_watchdog_interrupts_a_looping_agent_and_reminds_it() -> None:
    llm = ScriptedLLM([LOOP], token_delay=0.3)
    config = AgentConfig(watchdog={"mode": "on", "every": 3})

    async def main() -> list[Any]:
        chat = ChatSession(config, _models(llm))
        await chat.start()
        await chat.send("Hi.")
        third = await chat.send("Hello?")
        await asyncio.sleep(20)  # the reply that replaces the interrupted one plays
        await chat.close()
        return [*chat.messages, third]

    messages = clock.run(main())
    third = messages[-1]
    verdicts = [m for m in messages if getattr(m, "kind", "") == "watchdog_verdict"]
    acted = [v for v in verdicts if "looping" in v.act]
    assert acted and acted[0].act["looping"] >= 0.7 and acted[0].interrupted_run
    assert third.outcome == "interrupted"  # the looping reply in flight was cut

    # the next request carries the reminder (a system message, this request only)
    def reminded(ctx: Any) -> bool:
        return any(
            m.role == "system" and REMINDERS["looping"] in (m.text_content or "")
            for m in ctx.messages()
        )

    assert [reminded(ctx) for ctx in llm.requests] == [False, False, False, True]
    # the replacement reply (no callee turn of its own) played to the end
    runs = [m for m in messages if getattr(m, "kind", "") == "turn_settled" and m.run_id]
    assert [m.outcome for m in runs][-2:] == ["interrupted", "completed"]
    assert runs[-1].turn_id is None


def _replay_with(oracle: Any, mode: str, tmp_path: Path) -> ReplayedCall:
    call = _inline(
        """
name: steady
direction: inbound
callee:
  - after: agent_turn
    gap: 0.5
    timeout: 10
    say: "Hi, I need to move my appointment."
  - after: agent_turn
    gap: 0.5
    timeout: 10
    say: "Tuesday works."
  - after: agent_turn
    gap: 0.5
    timeout: 10
    say: "Thanks, bye."
  - after: agent_turn
    gap: 0.5
    timeout: 10
    hangup: true
max_seconds: 60
""",
        tmp_path,
    )
    replies = [
        "Hello, this is Sam from Acme Dental.",
        "Sure, which day suits you?",
        "Tuesday at ten is booked for you.",
        "You're welcome, goodbye.",
    ]
    models = _models(ScriptedLLM(replies), watchdog_oracle=oracle)
    replayer = Replayer(
        AgentConfig(watchdog={"mode": mode, "every": 1}),
        ReplayOptions(text_only=True),
        models=models,
    )

    async def main() -> ReplayedCall:
        return await replayer.replay(call)

    return clock.run(main())


def test_a_hanging_watchdog_oracle_never_delays_a_reply(tmp_path: Path) -> None:
    hanging = ScriptedDecisionModel(hang=True)
    watched = _replay_with(hanging, "on", tmp_path)
    plain = _replay_with(None, "off", tmp_path)
    assert watched.result.ok and plain.result.ok
    starts = [t.start for t in watched.result.turns if t.role == "agent"]
    assert starts == pytest.approx(
        [t.start for t in plain.result.turns if t.role == "agent"], abs=0.01
    )
    assert hanging.inputs  # the oracle was asked (and never answered)
    verdicts = [m for m in watched.messages if getattr(m, "kind", "") == "watchdog_verdict"]
    assert verdicts and all(v.source == "heuristic" for v in verdicts)


def test_the_goal_follows_the_call_and_denied_tools_settle_the_watchdog(tmp_path: Path) -> None:
    """An IVR menu is judged against the IVR goal; a person against the task."""
    from agent.core.messages import ToolCallReviewed
    from agent.trust.call_controls import CallControls
    from agent.trust.tools import CallTrust, ToolPolicy

    class Spy:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def set_goal(self, goal: str) -> None:
            self.calls.append(("goal", goal))

        def settle(self, finding: str) -> None:
            self.calls.append(("settle", finding))

        def observe(self, role: str, text: str) -> None:
            return None

    spy = Spy()
    trust = CallTrust(channel="voice", caller_number=None)
    policy = ToolPolicy(call_id="c", trust=trust, publish=lambda m: None, goal="book a cleaning")
    controls = CallControls(
        call_id="c", publish=lambda m: None, trust=trust, policy=policy, watchdog=spy
    )
    controls.set_goal("book a cleaning")  # unchanged: nothing to drop
    controls.set_goal("reach the pharmacy")
    review = dict(tool="t", proposed="ask", would="ask", reason="unverified_caller")
    controls.on_tool_review(ToolCallReviewed(call_id="c", decision="deny", **review))  # type: ignore[arg-type]
    controls.on_tool_review(ToolCallReviewed(call_id="c", decision="allow", **review))  # type: ignore[arg-type]
    assert spy.calls == [("goal", "reach the pharmacy"), ("settle", "unsafe_next_action")]
    assert policy.goal == "reach the pharmacy"


def test_an_ivr_call_moves_the_goal_to_the_ivr_goal(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.replay.loader import load_paths
    from agent.trust.call_controls import CallControls
    from tests.conftest import CALLS
    from tests.unit.test_replay_calls import _replay, _replayer

    goals: list[str] = []
    original = CallControls.set_goal

    def spy(self: CallControls, goal: str) -> None:
        goals.append(goal)
        original(self, goal)

    monkeypatch.setattr(CallControls, "set_goal", spy)
    call = load_paths([CALLS / "ivr-sales-support.call.yaml"])[0]
    (r,) = _replay([call], _replayer(watchdog={"mode": "on"}))
    assert r.result.ok
    assert r.result.amd is not None and r.result.amd.stages == ["machine-ivr", "human"]
    ivr_goal = call.agent.get("ivr_goal") or "reach a person"
    changes = [g for i, g in enumerate(goals) if i == 0 or goals[i - 1] != g]
    # the menu is judged against the IVR goal, the person behind it against the task
    assert changes[-2:] == [ivr_goal, AgentConfig().task]
