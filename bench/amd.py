"""AMD quality: accuracy, confusion matrix, decision latency and beep timing.

Replays a suite of recorded calls (``tests/calls/amd`` by default) through the
whole runtime, in text-only mode, audio mode or both, and prints:

* final-category accuracy and stage-sequence accuracy (calls that state
  ``amd_stages``), with every miss listed;
* a confusion matrix (expected rows, predicted columns);
* decision latency: for calls expected ``human``, seconds from the end of the
  callee line the decision followed (the simulator's ground truth: the
  person's first utterance) to AMD's decision, p50/p95 (a decision made in the
  quiet a synthesised line ends with counts as 0 s after that line; the same
  from the end of the voice is printed beside it); separately for calls where
  the person answered first; for every decided call, from the answer;
* machine calls first taken for a person: the fast "person" verdict is
  provisional, so a later beep or menu corrects it, but the agent has begun
  talking to a machine; the faster the person rule, the more of these;
* voicemail timing: of the calls whose callee plays a tone after speech and
  that expect a voicemail, how many messages started after the beep, and
  whether any message overlapped a tone.

Calls run on the virtual clock (``--speed max``) by default: replay time stands
still while a model computes, so latencies exclude model compute. The fast
"person" rule needs no model (it uses speech timing). ``--real-clock`` runs on
the wall clock so compute counts (slow: real time per call). Prints figures;
asserts nothing.

Usage::

    .venv/bin/python bench/amd.py [PATH...] [--mode text|audio|both] [--voices V,V...]
        [--config FILE] [--real-clock]

Audio mode replays the suite once per voice in ``--voices`` (Piper and three
espeak-ng voices by default; agent/telephony/sim/voices.py describes the voice
strings), and the summary gives accuracy per voice and expected category.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np

from agent.app.config import AgentConfig, ConfigError, load_config
from agent.app.logs import setup_logging
from agent.core import clock
from agent.core.messages import AmdPrediction
from agent.models.registry import ModelConfigError, UnknownModelError
from agent.replay.loader import RecordedCallError, load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions
from agent.telephony.sim.recorded_call import RecordedCall
from agent.telephony.sim.voices import (
    SUITE_VOICES,
    Voice,
    VoiceError,
    check_installed,
    parse_voice,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = [ROOT / "tests" / "calls" / "amd", ROOT / "tests" / "calls" / "amd-voices"]
DEFAULT_VOICES = ",".join(SUITE_VOICES)
CATEGORIES = [
    "human",
    "machine-screening",
    "machine-vm",
    "machine-ivr",
    "machine-unavailable",
    "uncertain",
]
SHORT = {
    "human": "human",
    "machine-screening": "screen",
    "machine-vm": "vm",
    "machine-ivr": "ivr",
    "machine-unavailable": "unavail",
    "uncertain": "uncert",
}


@dataclass
class Row:
    name: str
    expected: str | None
    got: str
    stages_expected: list[str] | None
    stages: list[str]
    decided_at: float | None
    human_delay: float | None
    voice_delay: float | None
    beep_ends: list[float]
    message: tuple[float, float] | None
    tones: list[tuple[float, float]]
    wall: float
    talk_after_human: float | None
    heard: list[str]
    #: a machine call whose first verdict was a person: the agent began talking to it
    person_first: bool = False


def command_line() -> str:
    """The command as run, prefixed with its working directory."""
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"


def pct(values: list[float]) -> str:
    if not values:
        return "n=0"
    arr = np.asarray(values, dtype=np.float64)
    return (
        f"n={arr.size}  p50={np.percentile(arr, 50):.3f}  p95={np.percentile(arr, 95):.3f}  "
        f"max={arr.max():.3f}"
    )


def _row(call: RecordedCall, r: ReplayedCall) -> Row:
    res = r.result
    amd = res.amd
    tones = [(s, e) for p, s, e in r.played if p == "tone"]
    speech_ends = [e for p, _, e in r.played if p in ("say", "audio")]
    # a beep is a tone that follows callee speech (SIT tones come before any words)
    beep_ends = [e for s, e in tones if any(end <= s for end in speech_ends)]
    expected = call.expect.amd
    return Row(
        name=call.name,
        expected=expected,
        got=amd.category if amd is not None else "none",
        stages_expected=list(call.expect.amd_stages) if call.expect.amd_stages else None,
        stages=list(amd.stages) if amd is not None else [],
        decided_at=amd.decided_at if amd is not None else None,
        human_delay=r.amd_delay if expected == "human" else None,
        voice_delay=r.amd_delay_from_voice if expected == "human" else None,
        beep_ends=beep_ends,
        message=r.voicemail_message,
        tones=tones,
        wall=r.wall_seconds,
        talk_after_human=r.talk_after_human,
        heard=[t.text for t in res.turns if t.role == "callee"],
        person_first=_is_machine(expected) and _first_verdict(r) == "human",
    )


def _first_verdict(r: ReplayedCall) -> str | None:
    """The category of AMD's first verdict on the call, provisional or not."""
    for m in r.messages:
        if isinstance(m, AmdPrediction) and m.category not in ("wait", "uncertain"):
            return m.category
    return None


async def run_mode(
    calls: list[RecordedCall], config: AgentConfig, *, text_only: bool, voice: Voice | None = None
) -> list[Row]:
    # the run's voice says every line whose call names none; speed and pitch differ per call
    options = ReplayOptions(text_only=text_only, voice=voice.text if voice is not None else None)
    replayer = Replayer(config, options)
    rows = []
    for call in calls:
        replayed = await replayer.replay(call)
        row = _row(call, replayed)
        mark = "ok " if row.got == row.expected else "MISS"
        decided = f"{row.decided_at:.2f}" if row.decided_at is not None else "-"
        # a person's decision delay after their line / after the voice in it
        after = (
            f" after {row.human_delay:.2f}/{row.voice_delay or 0.0:.2f}"
            if row.got == "human" and row.human_delay is not None
            else ""
        )
        print(
            f"  {mark} {row.name:<44} expected {row.expected or '-':<20} got {row.got:<20} "
            f"decided {decided:<7} "
            f"wall {row.wall:.1f}s{after}",
            flush=True,
        )
        rows.append(row)
    return rows


def summary(results: dict[str, list[Row]]) -> None:
    """One line per run (mode and voice): accuracy per expected category and overall."""
    print()
    print("final category accuracy per run and expected category (right/calls):")
    cats = [c for c in CATEGORIES if any(r.expected == c for rs in results.values() for r in rs)]
    print(
        f"  {'run':<48}"
        + "".join(f"{SHORT[c]:>9}" for c in cats)
        + f"{'all':>17}{'p50':>7}{'p50v':>7}{'m>p':>8}"
    )
    for run, rows in results.items():
        cells = []
        for c in cats:
            mine = [r for r in rows if r.expected == c]
            cells.append(f"{sum(r.got == c for r in mine)}/{len(mine)}")
        judged = [r for r in rows if r.expected is not None]
        right = sum(r.got == r.expected for r in judged)
        direct = [
            r.human_delay
            for r in judged
            if r.human_delay is not None and r.got == "human" and r.stages_expected == ["human"]
        ]
        p50 = f"{np.percentile(direct, 50):.2f}" if direct else "-"
        from_voice = [
            r.voice_delay for r in _answered_directly(judged) if r.voice_delay is not None
        ]
        p50v = f"{np.percentile(from_voice, 50):.2f}" if from_voice else "-"
        share = f"{right}/{len(judged)} {100 * right / max(1, len(judged)):.1f}%"
        machines = _machine_calls(judged)
        first = f"{sum(r.person_first for r in machines)}/{len(machines)}"
        print(
            f"  {run:<48}"
            + "".join(f"{x:>9}" for x in cells)
            + f"{share:>17}{p50:>7}{p50v:>7}{first:>8}"
        )
    print(
        "  (p50: seconds from the end of the line of a person who answered the call to the"
        " decision,\n   0 when it came in the quiet the line ends with;"
        " p50v: the same from the end of the voice in that line,\n   without the"
        " quiet the synthesiser appended;"
        " m>p: machine calls whose first verdict was a person)"
    )


def _machine_calls(rows: list[Row]) -> list[Row]:
    """Calls expected to reach a machine (voicemail, menu, screener, intercept)."""
    return [r for r in rows if _is_machine(r.expected)]


def _is_machine(category: str | None) -> bool:
    return category is not None and category.startswith("machine-")


def _answered_directly(rows: list[Row]) -> list[Row]:
    """Person calls decided human where the person answered the call (no machine first)."""
    return [
        r
        for r in rows
        if r.human_delay is not None and r.got == "human" and r.stages_expected == ["human"]
    ]


def report(rows: list[Row], mode: str) -> None:
    judged = [r for r in rows if r.expected is not None]
    right = [r for r in judged if r.got == r.expected]
    staged = [r for r in judged if r.stages_expected is not None]
    stage_right = [r for r in staged if r.stages == r.stages_expected]
    print()
    print(f"== {mode}: {len(judged)} calls")
    print(
        f"final category accuracy: {len(right)}/{len(judged)} = "
        f"{100 * len(right) / max(1, len(judged)):.1f}%"
    )
    print(
        f"stage sequence accuracy: {len(stage_right)}/{len(staged)} = "
        f"{100 * len(stage_right) / max(1, len(staged)):.1f}% (calls that state amd_stages)"
    )
    for r in judged:
        if r.got != r.expected:
            print(f"  miss: {r.name}: expected {r.expected}, got {r.got} (stages {r.stages})")
            print(f"    heard: {' | '.join(repr(text) for text in r.heard) or '(no words)'}")
        elif r.stages_expected is not None and r.stages != r.stages_expected:
            print(f"  stage miss: {r.name}: expected {r.stages_expected}, got {r.stages}")
    print()
    counts = Counter((r.expected, r.got) for r in judged)
    cols = [*CATEGORIES, "none"]
    print("confusion (rows expected, columns predicted):")
    print(f"  {'':<10}" + "".join(f"{SHORT.get(c, c):>9}" for c in cols))
    for exp in CATEGORIES:
        if not any(r.expected == exp for r in judged):
            continue
        print(f"  {SHORT[exp]:<10}" + "".join(f"{counts.get((exp, c), 0):>9}" for c in cols))
    print()
    humans = [r.human_delay for r in judged if r.human_delay is not None and r.got == "human"]
    direct = [
        r.human_delay
        for r in judged
        if r.human_delay is not None and r.got == "human" and r.stages_expected == ["human"]
    ]
    print("decision latency, humans, from the end of the person's utterance it followed (s):")
    print(f"  every human call:            {pct(humans)}")
    print(f"  the person answered the call: {pct(direct)}")
    from_voice = [r.voice_delay for r in _answered_directly(judged) if r.voice_delay is not None]
    print(f"  the same, from the end of the voice: {pct(from_voice)}")
    talk = [r.talk_after_human for r in judged if r.talk_after_human is not None]
    print(f"agent audio after the person verdict (s, on the run's clock): {pct(talk)}")
    decided = [r.decided_at for r in judged if r.decided_at is not None]
    print(f"decision time from the answer, every decided call (s): {pct(decided)}")
    machines = _machine_calls(judged)
    first = [r for r in machines if r.person_first]
    print(
        f"machine calls first taken for a person (the agent began talking to a machine): "
        f"{len(first)}/{len(machines)}"
        + (f" ({', '.join(r.name for r in first)})" if first else "")
    )
    print()
    vm = [r for r in judged if r.expected == "machine-vm" and r.beep_ends]
    after = [r for r in vm if r.message is not None and r.message[0] >= r.beep_ends[-1]]
    overlaps = [
        r
        for r in judged
        if r.message is not None and any(s < r.message[1] and e > r.message[0] for s, e in r.tones)
    ]
    left = [r for r in vm if r.message is not None]
    share = 100 * len(after) / max(1, len(vm))
    print(
        f"voicemail with a beep: {len(vm)} calls; message left in {len(left)}; "
        f"started after the beep in {len(after)}/{len(vm)} = {share:.1f}%"
    )
    gaps = [r.message[0] - r.beep_ends[-1] for r in after if r.message is not None]
    print(f"  beep end to message start (s): {pct(gaps)}")
    print(f"  messages overlapping a tone: {len(overlaps)}")
    for r in overlaps:
        print(f"    overlap: {r.name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="*.call.yaml files or folders")
    parser.add_argument("--mode", choices=["text", "audio", "both"], default="both")
    parser.add_argument("--config", type=Path, default=None, help="agent config YAML")
    parser.add_argument(
        "--voices",
        default=DEFAULT_VOICES,
        help="comma-separated callee voices for audio mode: piper, "
        "espeak[:ACCENT[+VARIANT]][:speed=WPM[-WPM]][:pitch=P[-P]] (default: %(default)s)",
    )
    parser.add_argument(
        "--real-clock",
        action="store_true",
        help="run on the wall clock, so model compute counts in every latency (slow)",
    )
    args = parser.parse_args(argv)

    setup_logging(verbose=False, json_logs=False)
    print(f"$ {command_line()}")
    try:
        config = load_config(args.config)
        calls = load_paths(args.paths or DEFAULT_PATHS)
        voices = [parse_voice(v) for v in args.voices.split(",")]
        for voice in voices:
            check_installed(voice)
    except (ConfigError, RecordedCallError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except VoiceError as exc:
        print(f"error: --voices: {exc}", file=sys.stderr)
        return 2
    clock_name = "real (wall clock)" if args.real_clock else "virtual (--speed max)"
    print(f"calls: {len(calls)}; classifier: {config.amd.classifier}; clock: {clock_name}")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    modes = ["text", "audio"] if args.mode == "both" else [args.mode]
    runs: list[tuple[str, bool, Voice | None]] = []
    for mode in modes:
        if mode == "text":
            runs.append(("text", True, None))
        else:
            runs += [(f"audio {v.text}", False, v) for v in voices]
    results: dict[str, list[Row]] = {}
    for name, text_only, run_voice in runs:
        print()
        print(f"-- replaying, {name}")
        started = time.perf_counter()
        try:
            results[name] = clock.run(
                run_mode(calls, config, text_only=text_only, voice=run_voice),
                virtual=not args.real_clock,
                speed=None,
            )
        except (ConfigError, UnknownModelError, ModelConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"   ({time.perf_counter() - started:.0f} s wall)")
    for name, rows in results.items():
        report(rows, name)
    summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
