"""Warm transfer: the transfer_call tool awaits the line's warm-transfer task (a fake here).

A LiveKit line builds livekit's WarmTransferTask; its own behaviour needs a real
server. These tests check the runtime's side: the tool is offered only in warm
mode on a line that can do it, an unknown name is refused, a failed transfer
keeps the call going, and a completed one ends it ``transferred``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agent.app.call import ModelSet
from agent.app.chat import ChatSession
from agent.app.config import AgentConfig
from agent.core import clock
from agent.models.estimate_tts import EstimateTTS
from agent.models.script_llm import ScriptLLM
from agent.telephony.chat_line import ChatLine
from agent.telephony.sim.io import TranscriptFeedSTT

SCRIPT = """
replies:
  - when: 'CALL_OPENING'
    say: "Hello, this is Sam."
  - when: 'nobody'
    say: "Let me try."
    tool: {name: transfer_call, arguments: {target: "sales"}}
  - when: 'person'
    say: "Let me connect you with billing."
    tool: {name: transfer_call, arguments: {target: "billing"}}
after_tool:
  - when: 'transfer_call'
    say: "{result}"
default: "Okay."
"""


def _run(
    tmp_path: Path, mode: str, line_result: Any, text: str
) -> tuple[Any, list[Any], list[str]]:
    script = tmp_path / "replies.yaml"
    script.write_text(SCRIPT)
    dialled: list[str] = []

    class Task:
        def __init__(self, destination: str) -> None:
            dialled.append(destination)

        def __await__(self) -> Any:
            async def run() -> Any:
                if isinstance(line_result, Exception):
                    raise line_result
                return line_result

            return run().__await__()

    config = AgentConfig(transfer={"targets": {"billing": "+15550100200"}, "mode": mode})

    async def main() -> tuple[Any, list[Any]]:
        chat = ChatSession(
            config,
            ModelSet(
                stt=TranscriptFeedSTT(),
                llm=ScriptLLM.from_file(script),
                tts=EstimateTTS(sample_rate=16000),
                vad=None,
                turn_detection="stt",
            ),
        )
        await chat.start()
        reply = await chat.send(text)
        outcome = await chat.close()
        return (outcome, [*chat.messages, reply])

    with pytest.MonkeyPatch.context() as mp:
        # a line that can do warm transfers (a LiveKit line builds livekit's task here)
        mp.setattr(ChatLine, "warm_transfer_task", lambda self, d, ctx: Task(d), raising=False)
        init = ChatLine.__init__

        def declaring_init(self: ChatLine, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            self.capabilities = dataclasses.replace(self.capabilities, warm_transfer=True)

        mp.setattr(ChatLine, "__init__", declaring_init)
        outcome, messages = clock.run(main())
    return outcome, messages, dialled


def test_a_warm_transfer_briefs_then_hands_the_call_over(tmp_path: Path) -> None:
    outcome, messages, dialled = _run(tmp_path, "warm", object(), "Can I talk to a person?")
    assert dialled == ["+15550100200"]
    assert outcome.disposition == "transferred"
    (done,) = [m for m in messages if getattr(m, "kind", "") == "call_transferred"]
    assert done.target == "billing"


def test_a_failed_warm_transfer_keeps_the_call_going(tmp_path: Path) -> None:
    outcome, messages, dialled = _run(
        tmp_path, "warm", RuntimeError("no answer"), "Can I talk to a person?"
    )
    assert dialled == ["+15550100200"]
    assert not [m for m in messages if getattr(m, "kind", "") == "call_transferred"]
    assert "did not go through" in messages[-1].text
    assert outcome.disposition == "completed"


def test_an_unknown_name_is_refused_without_dialling(tmp_path: Path) -> None:
    _, messages, dialled = _run(tmp_path, "warm", object(), "Is nobody there?")
    assert dialled == []
    assert "no transfer target 'sales'" in messages[-1].text


def test_cold_mode_offers_no_transfer_tool(tmp_path: Path) -> None:
    outcome, messages, dialled = _run(tmp_path, "cold", object(), "Can I talk to a person?")
    assert dialled == [] and outcome.disposition == "completed"
    assert not [m for m in messages if getattr(m, "kind", "") == "call_transferred"]


def test_warm_mode_on_a_line_that_cannot_keeps_the_marker_rule() -> None:
    """The prompt names only what the call can do: no transfer_call tool on a plain line."""
    from tests.fakes.models import ScriptedLLM

    llm = ScriptedLLM(["Hello, this is Sam."])
    config = AgentConfig(transfer={"targets": {"billing": "+15550100200"}, "mode": "warm"})

    async def main() -> None:
        chat = ChatSession(
            config,
            ModelSet(
                stt=TranscriptFeedSTT(),
                llm=llm,
                tts=EstimateTTS(sample_rate=16000),
                vad=None,
                turn_detection="stt",
            ),
        )
        await chat.start()
        await chat.close()

    clock.run(main())
    system = llm.requests[0].messages()[0].text_content or ""
    assert "[TRANSFER:name]" in system and "transfer_call" not in system
