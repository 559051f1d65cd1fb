"""Replay speed: call-seconds replayed per wall-second on the virtual clock at speed max.

Replays ``tests/calls`` and ``configs/demo`` by default, text-only and with audio,
and prints per call the call seconds (virtual time the replay covered: ringing,
the call and its teardown), the wall seconds and their ratio, then the median and
minimum ratio per mode. Models are prewarmed before anything is timed. Prints
figures; asserts nothing.

Usage::

    .venv/bin/python bench/replay_speed.py [PATH...] [--mode text|audio|both] [--config FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)

from agent.app.config import AgentConfig, ConfigError, load_config
from agent.app.logs import setup_logging
from agent.core import clock
from agent.models.registry import ModelConfigError, UnknownModelError, prewarm
from agent.replay.loader import RecordedCallError, load_paths
from agent.replay.results import UNANSWERED_DISPOSITIONS
from agent.replay.runner import Replayer, ReplayOptions, default_cache_dir
from agent.telephony.sim.recorded_call import RecordedCall, SayPayload
from agent.telephony.sim.speech_cache import SpeechCache

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = [ROOT / "tests" / "calls", ROOT / "configs" / "demo"]
MODES = {"text": True, "audio": False}  # mode -> text_only


@dataclass
class CallSpeed:
    name: str
    ok: bool
    answered: bool
    call_seconds: float
    wall_seconds: float

    @property
    def ratio(self) -> float:
        return self.call_seconds / self.wall_seconds if self.wall_seconds > 0 else float("inf")


def command_line() -> str:
    """The command as run, prefixed with its working directory."""
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"


def callee_speech(calls: list[RecordedCall], sample_rate: int) -> SpeechCache:
    """The replay's callee voice with every ``say`` line of ``calls`` already rendered.

    Rendering a line the disk cache lacks runs Piper, which ``wall_seconds`` would
    otherwise count; the bench renders them first and passes this cache to the replayer.
    """
    from agent.telephony.sim.voices import piper_cache

    # the replayer's default voice, so the disk cache is shared
    cache = piper_cache(default_cache_dir() / "speech")
    texts = {
        seg.payload.text
        for call in calls
        for seg in call.callee
        if isinstance(seg.payload, SayPayload) and seg.payload.audio is None
    }
    missing = sum(1 for text in texts if not cache.path(text, sample_rate).is_file())
    started = time.perf_counter()
    for text in sorted(texts):
        cache.get(text, sample_rate)
    print(
        f"callee speech: {len(texts)} say lines rendered before timing "
        f"({missing} synthesised in {time.perf_counter() - started:.1f} s, the rest cached "
        f"in {cache.root})"
    )
    return cache


async def measure(
    calls: list[RecordedCall], config: AgentConfig, *, text_only: bool
) -> list[CallSpeed]:
    loop = asyncio.get_running_loop()
    options = ReplayOptions(text_only=text_only)
    synth = None if text_only else callee_speech(calls, options.sample_rate).get
    replayer = Replayer(config, options, synth=synth)
    models = replayer.models()
    started = time.perf_counter()
    await prewarm(models.stt, models.llm, models.tts)
    print(f"prewarm: model weights loaded in {time.perf_counter() - started:.1f} s (not timed)")
    print(f"{'call':<36} {'ok':<4} {'call s':>8} {'wall s':>8} {'ratio':>8}")
    out = []
    for call in calls:
        virtual0 = loop.time()
        replayed = await replayer.replay(call)
        result = replayed.result
        answered = result.disposition not in UNANSWERED_DISPOSITIONS
        row = CallSpeed(
            call.name, result.ok, answered, loop.time() - virtual0, replayed.wall_seconds
        )
        print(
            f"{row.name:<36} {'yes' if row.ok else 'no':<4} {row.call_seconds:>8.1f} "
            f"{row.wall_seconds:>8.2f} {row.ratio:>8.1f}",
            flush=True,
        )
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="*.call.yaml files or folders")
    parser.add_argument(
        "--mode", choices=["text", "audio", "both"], default="both", help="default: both"
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
    print("clock: virtual, speed max; calls run one after another in one process")
    print(
        f"models: stt={m.stt} llm={m.llm} tts={m.tts} vad={m.vad} text-only tts={m.text_only_tts}"
    )
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    print(
        "call s = virtual seconds the replay covered (ringing, call, teardown); "
        "wall s = ReplayedCall.wall_seconds (includes preparing the callee audio: "
        "line model, tones; speech comes from the pre-rendered cache)"
    )
    modes = list(MODES) if args.mode == "both" else [args.mode]
    summaries = []
    for mode in modes:
        text_only = MODES[mode]
        print()
        print(f"== mode: {mode} ({'transcripts in' if text_only else 'audio through VAD and STT'})")
        try:
            rows = clock.run(measure(calls, config, text_only=text_only), virtual=True, speed=None)
        except (ConfigError, UnknownModelError, ModelConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if not rows:
            continue
        ratios = [row.ratio for row in rows]
        total_call = sum(row.call_seconds for row in rows)
        total_wall = sum(row.wall_seconds for row in rows)
        summaries.append(
            f"{mode:<6} all {len(rows)} calls: median ratio={statistics.median(ratios):.1f}  "
            f"min ratio={min(ratios):.1f}  total {total_call:.1f} call s / {total_wall:.1f} wall s"
            f" = {total_call / total_wall:.1f}"
        )
        # never-answered calls (busy, no-answer, ...) take milliseconds: huge, meaningless ratios
        answered = [row.ratio for row in rows if row.answered]
        if answered:
            summaries.append(
                f"{mode:<6} {len(answered)} answered calls: median ratio="
                f"{statistics.median(answered):.1f}  min ratio={min(answered):.1f}"
            )
    print()
    print("ratio = call-seconds per wall-second")
    for line in summaries:
        print(line)
    print(f"host load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
