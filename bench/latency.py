"""Response latency on the wall clock: end of callee speech to the first agent audio.

Replays recorded calls (``configs/demo`` by default) through the full local stack
on the real clock (``clock.run(..., virtual=False)``): on the virtual clock time
stands still while a model runs, so only the wall clock shows what a caller would
wait. Prints every figure; it asserts nothing.

Usage::

    .venv/bin/python bench/latency.py [PATH...] [--text-only] [--config FILE]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np

from agent.config import AgentConfig, ConfigError, load_config
from agent.logs import setup_logging
from agent.models.registry import ModelConfigError, UnknownModelError, prewarm
from agent.replay.format import RecordedCall
from agent.replay.loader import RecordedCallError, load_paths
from agent.replay.runner import Replayer, ReplayOptions
from agent.runtime import clock

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = [ROOT / "configs" / "demo"]


@dataclass
class CallLatency:
    name: str
    ok: bool
    duration: float
    wall_seconds: float
    callee_turns: int
    latencies: list[float]
    from_audio_end: list[float]


def command_line() -> str:
    """The command as run, prefixed with its working directory."""
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"


def summary(values: list[float]) -> str:
    """``n``, p50, p95, mean and max of ``values`` (linear-interpolated percentiles)."""
    if not values:
        return "n=0"
    arr = np.asarray(values, dtype=np.float64)
    return (
        f"n={arr.size}  p50={np.percentile(arr, 50):.3f}  p95={np.percentile(arr, 95):.3f}  "
        f"mean={arr.mean():.3f}  max={arr.max():.3f}"
    )


async def measure(
    calls: list[RecordedCall], config: AgentConfig, *, text_only: bool
) -> list[CallLatency]:
    replayer = Replayer(config, ReplayOptions(text_only=text_only))
    models = replayer.models()
    started = time.perf_counter()
    await prewarm(models.stt, models.llm, models.tts)
    print(f"prewarm: model weights loaded in {time.perf_counter() - started:.1f} s (not timed)")
    print()
    print(
        f"{'call':<36} {'ok':<4} {'callee':>6} {'timed':>5} {'median':>7} {'max':>7} "
        f"{'call s':>7} {'wall s':>7}"
    )
    out = []
    for call in calls:
        replayed = await replayer.replay(call)
        lat = replayed.latencies
        result = replayed.result
        callee = sum(1 for turn in result.turns if turn.role == "callee")
        row = CallLatency(
            call.name,
            result.ok,
            result.duration,
            replayed.wall_seconds,
            callee,
            lat,
            replayed.latencies_from_audio_end,
        )
        median = f"{statistics.median(lat):.3f}" if lat else "-"
        worst = f"{max(lat):.3f}" if lat else "-"
        print(
            f"{row.name:<36} {'yes' if row.ok else 'no':<4} {callee:>6} {len(lat):>5} {median:>7} "
            f"{worst:>7} {row.duration:>7.1f} {row.wall_seconds:>7.1f}",
            flush=True,
        )
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="*.call.yaml files or folders")
    parser.add_argument(
        "--text-only", action="store_true", help="deliver speech as transcripts (no STT/TTS)"
    )
    parser.add_argument("--config", type=Path, default=None, help="agent config YAML")
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
    print("clock: real (wall clock); calls run one after another in one process")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print(
        "latency: end of callee speech (the session's user-speech-stopped event, i.e. after "
        "the VAD's silence window) to the first agent audio of the reply, seconds; "
        "timed = callee turns the agent answered before the callee spoke again or hung up"
    )
    try:
        rows = clock.run(measure(calls, config, text_only=args.text_only), virtual=False)
    except (ConfigError, UnknownModelError, ModelConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    every = [x for row in rows for x in row.latencies]
    medians = [statistics.median(row.latencies) for row in rows if row.latencies]
    truth = [x for row in rows for x in row.from_audio_end]
    print()
    print("from the session's end-of-speech event (after the VAD's silence window):")
    print(f"  all turns:        {summary(every)}")
    print(f"  per-call medians: {summary(medians)}")
    print("from the true end of the callee's audio (the simulator's ground truth; includes")
    print("the silence the VAD needs to decide the callee stopped):")
    print(f"  all turns:        {summary(truth)}")
    print(f"host load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
