"""Barge-in scoped to its run: a stale InterruptRun never cuts a newer reply."""

from __future__ import annotations

from typing import Any

import pytest

from agent.messages import AgentSpeechStarted, InterruptRun
from agent.session import SessionActor
from tests.unit.test_replay_calls import _call, _replay


def test_interrupt_run_only_hits_the_run_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[str] = []
    original_init = SessionActor.__init__

    def init(self: SessionActor, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)

        def on_start(msg: AgentSpeechStarted) -> None:
            starts.append(msg.run_id)
            if len(starts) == 2:  # the first reply is over: naming it must not cut this one
                self.tell_nowait(InterruptRun(call_id=self.call_id, run_id=starts[0]))
            if len(starts) == 3:  # naming the reply in flight interrupts it
                self.tell_nowait(InterruptRun(call_id=self.call_id, run_id=starts[2]))

        self.bus.subscribe("agent_speech_started", on_start)

    monkeypatch.setattr(SessionActor, "__init__", init)
    (r,) = _replay([_call("human-conversation-hangup")])
    agent = [t for t in r.result.turns if t.role == "agent"]
    assert len(starts) >= 3 and len(set(starts)) == len(starts)
    assert agent[1].interrupted is False
    assert agent[2].interrupted is True
    assert agent[2].end - agent[2].start < 0.2
