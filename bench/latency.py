"""Response latency on the wall clock, stage by stage: end of callee audio to first agent audio.

Replays recorded calls (``configs/demo`` and ``tests/calls/pauses`` by default) through
the full local stack on the real clock (``clock.run(..., virtual=False)``): on the
virtual clock time stands still while a model runs, so only the wall clock shows what
a caller would wait. For every answered callee turn the session publishes a
``TurnLatency`` (the same breakdown the replay JSON, the call pages and Prometheus
show); this prints p50/p95 per stage and of the total, the prompt tokens the LLM
reused, and the cut-ins (agent audio starting before the callee's utterance ended).
It asserts nothing and exits 0 (2 on bad arguments or input).

With ``--virtual-clock`` the same calls run on the virtual clock, where models take no
time: the stage figures then leave model time out, but the cut-ins are those of a
machine whose models answer at once. Manners must hold there too: a slow model must
not be what keeps the agent from talking over a callee who paused.

Usage::

    .venv/bin/python bench/latency.py [PATH...] [--text-only] [--config FILE] [--virtual-clock]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np

from agent.app.config import AgentConfig, ConfigError, load_config
from agent.app.logs import setup_logging
from agent.core import clock
from agent.core.messages import LATENCY_STAGES, TurnLatency
from agent.models.registry import ModelConfigError, UnknownModelError, prewarm
from agent.replay.loader import RecordedCallError, load_paths
from agent.replay.runner import Replayer, ReplayOptions
from agent.telephony.sim.recorded_call import RecordedCall

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = [ROOT / "configs" / "demo", ROOT / "tests" / "calls" / "pauses"]


@dataclass
class CallRow:
    name: str
    ok: bool
    callee_turns: int
    wall_seconds: float
    cut_ins: int
    turns: list[TurnLatency] = field(default_factory=list)


def command_line() -> str:
    """The command as run, prefixed with its working directory."""
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"


def pcts(values: list[float]) -> tuple[str, str, str]:
    """p50, p95 and max of ``values`` as printable strings ("-" when empty)."""
    if not values:
        return "-", "-", "-"
    arr = np.asarray(values, dtype=np.float64)
    return (
        f"{np.percentile(arr, 50):.3f}",
        f"{np.percentile(arr, 95):.3f}",
        f"{arr.max():.3f}",
    )


async def measure(
    calls: list[RecordedCall], config: AgentConfig, *, text_only: bool
) -> list[CallRow]:
    replayer = Replayer(config, ReplayOptions(text_only=text_only))
    models = replayer.models()
    started = time.perf_counter()
    await prewarm(models.stt, models.llm, models.tts)
    print(f"prewarm: model weights loaded in {time.perf_counter() - started:.1f} s (not timed)")
    print()
    print(
        f"{'call':<40} {'ok':<4} {'callee':>6} {'timed':>5} {'p50':>6} {'max':>6} "
        f"{'cut-ins':>7} {'wall s':>7}"
    )
    out = []
    for call in calls:
        replayed = await replayer.replay(call)
        result = replayed.result
        turns = [m for m in replayed.messages if isinstance(m, TurnLatency)]
        row = CallRow(
            call.name,
            result.ok,
            sum(1 for t in result.turns if t.role == "callee"),
            replayed.wall_seconds,
            getattr(replayed, "cut_ins", 0),
            turns,
        )
        p50, _, worst = pcts([t.total() for t in turns])
        print(
            f"{row.name:<40} {'yes' if row.ok else 'no':<4} {row.callee_turns:>6} "
            f"{len(turns):>5} {p50:>6} {worst:>6} {row.cut_ins:>7} {row.wall_seconds:>7.1f}",
            flush=True,
        )
        out.append(row)
    return out


def report(rows: list[CallRow]) -> None:
    """The stage table, the totals, prompt reuse and cut-ins."""
    turns = [t for row in rows for t in row.turns]
    print()
    print(f"answered callee turns: {len(turns)} in {len(rows)} calls")
    print()
    print(f"{'stage':<18} {'p50':>7} {'p95':>7} {'max':>7}   what it measures")
    meaning = {
        "vad": "callee audio end -> the VAD ends the speech segment",
        "stt": "-> the final transcript",
        "endpointing": "-> the turn is committed",
        "llm_request": "-> the LLM request is sent",
        "llm_first_token": "-> its first token",
        "first_sentence": "-> the sentence gate releases the first sentence",
        "tts": "-> TTS has the first audio",
        "playout": "-> the first agent audio is played",
    }
    stages = [t.stages() for t in turns]
    for stage in LATENCY_STAGES:
        p50, p95, worst = pcts([s[stage] for s in stages])
        print(f"{stage:<18} {p50:>7} {p95:>7} {worst:>7}   {meaning[stage]}")
    p50, p95, worst = pcts([t.total() for t in turns])
    print(f"{'total':<18} {p50:>7} {p95:>7} {worst:>7}   callee audio end -> first agent audio")
    from_vad = [t.first_audio - t.vad_end for t in turns if t.vad_end is not None]
    p50, p95, worst = pcts(from_vad)
    label = "from VAD end"
    print(f"{label:<18} {p50:>7} {p95:>7} {worst:>7}   the VAD's end of speech -> first audio")
    print("(each stage counts only the time it added to the critical path; stages sum to total)")
    print()
    later = [t for t in turns if t.prompt_tokens and t.cached_tokens is not None]
    reused = [t.cached_tokens / t.prompt_tokens for t in later if t.cached_tokens]  # type: ignore[operator]
    if later:
        share = np.mean([t.cached_tokens / t.prompt_tokens for t in later])  # type: ignore[operator]
        print(
            f"LLM prompt: {np.mean([t.prompt_tokens for t in later]):.0f} tokens on average, "
            f"{share:.0%} of them reused from the context's cache "
            f"({len(reused)} of {len(later)} requests reused some)"
        )
    preemptive = sum(1 for t in turns if t.preemptive)
    print(f"preemptive replies kept: {preemptive} of {len(turns)}")
    print(
        f"cut-ins (agent audio before the callee's utterance ended): {sum(r.cut_ins for r in rows)}"
    )
    clocks = {t.clock for t in turns}
    if clocks != {"wall"}:
        print(f"note: clock {sorted(clocks)}: virtual-clock stages leave model time out")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="*.call.yaml files or folders")
    parser.add_argument(
        "--text-only", action="store_true", help="deliver speech as transcripts (no STT/TTS)"
    )
    parser.add_argument("--config", type=Path, default=None, help="agent config YAML")
    parser.add_argument(
        "--virtual-clock",
        action="store_true",
        help="run on the virtual clock (models take no time: cut-ins of an instant machine)",
    )
    args = parser.parse_args(argv)

    setup_logging(verbose=False, json_logs=False)
    print(f"$ {command_line()}")
    try:
        config = load_config(args.config)
        calls = load_paths(args.paths or DEFAULT_PATHS)
    except (ConfigError, RecordedCallError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    m = config.models
    if args.text_only:
        mode = f"text-only (transcripts in; llm={m.llm}, tts={m.text_only_tts})"
    else:
        mode = f"audio (line model, vad={m.vad}, stt={m.stt}, llm={m.llm}, tts={m.tts})"
    print(f"mode: {mode}")
    if args.virtual_clock:
        print("clock: virtual (models take no time); calls run one after another in one process")
    else:
        print("clock: real (wall clock); calls run one after another in one process")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    try:
        rows = clock.run(
            measure(calls, config, text_only=args.text_only), virtual=args.virtual_clock
        )
    except (ConfigError, UnknownModelError, ModelConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report(rows)
    print(f"host load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
