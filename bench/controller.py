"""Call-control costs: marker filtering, strict denials, the tool gate and the watchdog.

Prints figures (it asserts nothing), wall clock on this machine:

1. **Marker filter**: microseconds per reply to strip markers from a reply
   streamed in 3-character chunks (the LLM's typical token size).
2. **Strict side effects**: for an unverified phone caller, the time from the
   LLM's tool call to the tool's answer ("not available on this call"), through
   a real chat session (reply script LLM, real loop). The issue's bar is "well
   under a second"; nothing waits on a timeout.
3. **Tool gate** (heuristics): time per ``advise`` on a destructive call.
4. **Watchdog** (heuristics): time per ballot over four turns.

Usage::

    .venv/bin/python bench/controller.py [--n 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))]
    return f"p50 {statistics.median(xs) * 1000:.3f} ms, p95 {p95 * 1000:.3f} ms (n={len(xs)})"


REPLIES = [
    "Thanks for calling, goodbye. [END_CALL] Is there anything else?",
    "Let me transfer you to our billing team now. [TRANSFER:billing]",
    "Sure, I can help with that. Your appointment is on Tuesday at ten in the morning.",
    "Let me check with the account holder. [ASK_GUARDIAN:May we refund the charge?]",
]


def bench_markers(n: int) -> None:
    from agent.session.markers import MarkerFilter

    times: list[float] = []
    for i in range(n):
        text = REPLIES[i % len(REPLIES)]
        t0 = time.perf_counter()
        f = MarkerFilter()
        for k in range(0, len(text), 3):
            f.feed(text[k : k + 3])
            if f.done:
                break
        f.flush()
        times.append(time.perf_counter() - t0)
    print(f"1. marker filter, per reply: {_ms(times)}")


SCRIPT = """
replies:
  - when: 'CALL_OPENING'
    say: "Hello, this is Sam."
  - when: 'cancel'
    say: "Let me do that."
    tool: {name: cancel_appointment, arguments: {appointment_id: "A100"}}
after_tool:
  - when: 'cancel_appointment'
    say: "{result}"
"""


def bench_strict(n: int) -> None:
    from agent.app.call import ModelSet
    from agent.app.chat import ChatSession
    from agent.app.config import AgentConfig
    from agent.core import clock
    from agent.models.estimate_tts import EstimateTTS
    from agent.models.script_llm import ScriptLLM
    from agent.telephony.sim.io import TranscriptFeedSTT
    from agent.trust import tools as tools_mod

    durations: list[float] = []
    original = tools_mod.ToolPolicy.review

    async def timed(self: Any, tool: Any, args: dict[str, Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return await original(self, tool, args)
        finally:
            durations.append(time.perf_counter() - t0)

    tools_mod.ToolPolicy.review = timed  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "replies.yaml"
        script.write_text(SCRIPT)
        config = AgentConfig(
            tools=[{"function": "examples.tools:cancel_appointment"}],
            guardian={"numbers": ["+15550100999"], "pin": "2468"},
        )

        async def main() -> list[str]:
            chat = ChatSession(
                config,
                ModelSet(
                    stt=TranscriptFeedSTT(),
                    llm=ScriptLLM.from_file(script),
                    tts=EstimateTTS(sample_rate=16000),
                    vad=None,
                    turn_detection="stt",
                ),
                channel="voice",
                caller_number="+15550100999",
            )
            await chat.start()
            for _ in range(n):
                await chat.send("Please cancel my appointment.")
            await chat.close()
            return [m.reason for m in chat.messages if m.kind == "tool_call_reviewed"]

        reasons = clock.run(main(), virtual=False)
    tools_mod.ToolPolicy.review = original  # type: ignore[method-assign]
    denied = sum(r == "unverified_caller" for r in reasons)
    print(f"2. strict side effects, tool call to denial: {_ms(durations)}; denied {denied}/{n}")


def bench_gate(n: int) -> None:
    from guardrails.toolgate import ToolCallInfo, ToolGate

    gate = ToolGate(mode="on", log=lambda e: None)
    call = ToolCallInfo(
        name="cancel_appointment",
        arguments={"appointment_id": "A100"},
        description="Cancel an appointment by its id.",
    )
    times: list[float] = []

    async def main() -> str:
        decision = ""
        for _ in range(n):
            t0 = time.perf_counter()
            advice = await gate.advise(
                call, "allow", goal="check an appointment", recent=[("caller", "When is it?")]
            )
            times.append(time.perf_counter() - t0)
            decision = advice.decision
        return decision

    decision = asyncio.run(main())
    print(f"3. tool gate (heuristics), per advise: {_ms(times)}; decision {decision}")


def bench_watchdog(n: int) -> None:
    from guardrails.watchdog import Watchdog

    times: list[float] = []

    async def main() -> None:
        wd = Watchdog(mode="on", goal="confirm the appointment time", log=lambda e: None)
        for turn in (
            ("caller", "Hi, when is my appointment?"),
            ("agent", "I can help you with that, let me check."),
            ("caller", "Okay?"),
            ("agent", "I can help you with that, let me check."),
        ):
            wd.observe(*turn)
        for _ in range(n):
            t0 = time.perf_counter()
            await wd.ballot()
            times.append(time.perf_counter() - t0)
        await wd.aclose()

    asyncio.run(main())
    print(f"4. watchdog ballot (heuristics): {_ms(times)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="repetitions per figure")
    args = ap.parse_args()
    bench_markers(args.n * 10)
    bench_strict(max(10, args.n // 10))
    bench_gate(args.n)
    bench_watchdog(args.n)


if __name__ == "__main__":
    main()
