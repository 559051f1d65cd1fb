"""Local STT, batch vs streaming: word error rate and END_OF_SPEECH -> final transcript delay.

Takes the callee's ``say`` lines of recorded calls (``configs/demo`` and the top level of
``tests/calls`` by default; lines with ``audio:`` play their file from
``tests/calls/audio``), rendered as a replay renders them: the replayer's Piper voice
(or ``--voice``) through its speech cache, or the audio file, then the call's line model
and line noise.
Each call's lines are fed in 20 ms frames on the wall clock, 0.5 s of silence first and
1 s after each line, through one STT stream per call and mode:

- batch: ``local/whisper-tiny.en`` with ``streaming=False``, through livekit's
  ``stt.StreamAdapter`` with the silero VAD (what AgentSession does with it);
- streaming: ``StreamingWhisperSTT`` with the same VAD (the registry's default).

``--mode whole`` decodes each line in one piece instead, as fast as the machine allows
(no VAD, no clock): recognition alone, for comparing decode options and voices.

Prints the word error rate (words lowercased, punctuation dropped, numbers written out
as words, word-level edit distance over all lines) and the delay from each
END_OF_SPEECH to its FINAL_TRANSCRIPT (p50, p95, max), the process CPU time per
mode, and the lines whose transcripts differ between modes. Asserts nothing and exits 0
(2 on bad arguments or input).

Usage::

    .venv/bin/python bench/stt.py [PATH...] [--mode batch|streaming|both|whole]
        [--cpu-threads N] [--beam N] [--llm-load] [--limit N] [--voice V]
        [--lines-per-call N] [--temperature-fallback] [--prompt TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np

from agent.app.config import AgentConfig, ConfigError, load_config
from agent.app.logs import setup_logging
from agent.core import Bus, clock
from agent.replay.loader import RecordedCallError, load_paths
from agent.telephony.audio import to_int16
from agent.telephony.sim.recorded_call import RecordedCall
from agent.telephony.sim.voices import VoiceError, check_installed, parse_voice

if TYPE_CHECKING:
    from livekit.agents import stt

    from agent.models.whisper_stt import Decoded

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = [ROOT / "configs" / "demo", ROOT / "tests" / "calls"]
RATE = 16000  # the replay's session rate (ReplayOptions.sample_rate)
FRAME = RATE // 50
LEAD_IN, AFTER_LINE = 0.5, 1.0

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}


def number_words(n: int) -> list[str]:
    """``215`` -> ``two hundred fifteen``; past a million, digit by digit."""
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        return [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])
    if n < 1000:
        return [_ONES[n // 100], "hundred"] + (number_words(n % 100) if n % 100 else [])
    if n < 1_000_000:
        return [*number_words(n // 1000), "thousand"] + (number_words(n % 1000) if n % 1000 else [])
    return [_ONES[int(d)] for d in str(n)]


def normalise(text: str) -> list[str]:
    """Words for scoring: lowercase, no punctuation, numbers (and ordinals) as words."""
    words: list[str] = []
    for token in re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("'", "")).split():
        match = re.fullmatch(r"(\d+)(st|nd|rd|th)?", token)
        if match is None:
            words.append(token)
            continue
        spoken = number_words(int(match.group(1)))
        if match.group(2):
            last = spoken[-1]
            spoken[-1] = _ORDINALS.get(
                last, last[:-1] + "ieth" if last.endswith("y") else last + "th"
            )
        words.extend(spoken)
    return words


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions, insertions, deletions)."""
    row = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        prev, row[0] = row[0], i
        for j, hyp in enumerate(hypothesis, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ref != hyp))
    return row[len(hypothesis)]


@dataclass
class Line:
    call: str
    text: str
    audio: np.ndarray  # int16 at RATE, line model and noise applied


@dataclass
class ModeResult:
    mode: str
    heard: dict[int, list[str]] = field(default_factory=dict)  # line index -> finals
    delays: list[float] = field(default_factory=list)
    unpaired_ends: int = 0
    decodes: list[float] = field(default_factory=list)  # seconds per Whisper decode
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0


def command_line() -> str:
    """The command as run, prefixed with its working directory."""
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"


def render_lines(
    calls: list[RecordedCall],
    config: AgentConfig,
    voice: str | None = None,
    per_call: int | None = None,
) -> list[Line]:
    """Every callee ``say`` line (the first ``per_call`` of each call), rendered by the
    replay's own simulator and speech cache, in ``voice`` where the line or call names none."""
    from agent.replay.runner import Replayer, ReplayOptions, default_cache_dir
    from agent.telephony.sim.simulator import CallSimulator
    from agent.telephony.sim.voices import piper_cache

    # the replayer's voices and cache (Replayer.line_synth): the disk cache is shared
    cache = piper_cache(default_cache_dir() / "speech")
    replayer = Replayer(config, ReplayOptions(text_only=False, voice=voice))
    lines = []
    for call in calls:
        sim = CallSimulator(
            call,
            bus=Bus("bench"),
            text_only=False,
            synth=cache.get,
            line_synth=replayer.line_synth(call, cache.get),
            sample_rate=RATE,
        )
        sim.prepare()
        noise_db = call.line.noise_db if call.line is not None else None
        # the simulator's CalleeAudioInput adds the line's noise floor to every frame
        rng = np.random.default_rng(0)
        said = [seg for seg in sim.segments if seg.payload == "say" and seg.text]
        for seg in said[:per_call]:
            audio = np.concatenate([seg.audio, np.zeros(int(AFTER_LINE * RATE), np.float32)])
            if noise_db is not None:
                audio = audio + rng.standard_normal(len(audio)).astype(np.float32) * 10 ** (
                    noise_db / 20
                )
            lines.append(Line(call.name, seg.text, to_int16(np.clip(audio, -1.0, 1.0))))
    return lines


async def run_modes(
    modes: list[str], lines: list[Line], opts: dict[str, object], min_silence: float, verbose: bool
) -> list[ModeResult]:
    """Each call through each mode in turn, so that load from elsewhere hits both alike."""
    from livekit.agents import stt

    from agent.models import build_stt, build_vad, prewarm
    from agent.models.whisper_stt import WhisperSTT

    results, models = [], []
    for mode in modes:
        vad = build_vad("silero", min_silence_duration=min_silence)
        whisper = build_stt(
            "local/whisper-tiny.en", vad=vad if mode == "streaming" else None, **opts
        )
        assert isinstance(whisper, WhisperSTT)
        await prewarm(whisper)
        result = ModeResult(mode)
        whisper.transcribe = _counted(whisper.transcribe, result)  # type: ignore[method-assign]
        results.append(result)
        models.append(whisper if mode == "streaming" else stt.StreamAdapter(stt=whisper, vad=vad))
    calls: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        calls.setdefault(line.call, []).append(index)
    for indices in calls.values():
        for model, result in zip(models, results, strict=True):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await transcribe_call(model, lines, indices, result, verbose)
            result.cpu_seconds += time.process_time() - cpu0
            result.wall_seconds += time.perf_counter() - wall0
    for model in models:
        await model.aclose()
    return results


def decode_whole(
    lines: list[Line], opts: dict[str, object], prompt: str | None = None
) -> ModeResult:
    """Each line decoded in one piece, one after another: recognition alone (no VAD, no
    pacing; the line's trailing silence included), with ``prompt`` as Whisper's
    initial prompt of every decode when given."""
    from agent.models import build_stt
    from agent.models.whisper_stt import WhisperSTT

    whisper = build_stt("local/whisper-tiny.en", **opts)
    assert isinstance(whisper, WhisperSTT)
    result = ModeResult("whole")
    whisper.transcribe(np.zeros(RATE, np.float32))  # load the model first
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for index, line in enumerate(lines):
        started = time.perf_counter()
        decoded = whisper.transcribe(line.audio.astype(np.float32) / 32768.0, prompt=prompt)
        result.decodes.append(time.perf_counter() - started)
        if decoded.text:
            result.heard[index] = [decoded.text]
    result.cpu_seconds = time.process_time() - cpu0
    result.wall_seconds = time.perf_counter() - wall0
    return result


def _counted(transcribe: Callable[..., Decoded], result: ModeResult) -> Callable[..., Decoded]:
    def counted(*args: Any, **kwargs: Any) -> Decoded:
        started = time.perf_counter()
        try:
            return transcribe(*args, **kwargs)
        finally:
            result.decodes.append(time.perf_counter() - started)

    return counted


async def transcribe_call(
    model: stt.STT, lines: list[Line], indices: list[int], result: ModeResult, verbose: bool
) -> None:
    """Feed one call's lines through one stream; file each final under its line."""
    from livekit import rtc
    from livekit.agents import stt

    loop = asyncio.get_running_loop()
    playing = indices[0]
    ended_at: list[tuple[float, int]] = []
    async with model.stream() as stream:

        async def feed() -> None:
            nonlocal playing
            t0 = loop.time()
            n = 0
            chunks = [np.zeros(int(LEAD_IN * RATE), np.int16)] + [lines[i].audio for i in indices]
            for k, chunk in enumerate(chunks):
                if k > 0:
                    playing = indices[k - 1]
                for i in range(0, len(chunk), FRAME):
                    part = chunk[i : i + FRAME]
                    stream.push_frame(rtc.AudioFrame(part.tobytes(), RATE, 1, len(part)))
                    n += 1
                    # paced on absolute times: a late wake-up does not slow the feed down
                    delay = t0 + n * 0.02 - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
            stream.end_input()

        feeding = asyncio.create_task(feed())
        async for ev in stream:
            now = time.perf_counter()
            if ev.type == stt.SpeechEventType.END_OF_SPEECH:
                ended_at.append((now, playing))
            elif ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT and ended_at:
                # the adapter and the stream both send an utterance's final after its end
                started, line_index = ended_at.pop()
                result.delays.append(now - started)
                if verbose:
                    print(
                        f"  {result.mode} {lines[line_index].call}: final "
                        f"{now - started:.3f} s after END_OF_SPEECH: {ev.alternatives[0].text!r}",
                        flush=True,
                    )
                result.heard.setdefault(line_index, []).append(ev.alternatives[0].text)
        await feeding
    result.unpaired_ends += len(ended_at)


class LlmLoad:
    """The local LLM generating without pause in a thread (2 threads, as in a call)."""

    def __init__(self) -> None:
        from agent.models.llama_llm import LlamaOptions, load_llama_model

        self._model = load_llama_model(LlamaOptions())
        self._stop = threading.Event()
        self.tokens = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LlmLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        prompt = "Write a long story about a dentist who answers the phone."
        while not self._stop.is_set():
            with self._model.lock:
                for _chunk in self._model.llama.create_completion(
                    prompt, max_tokens=48, temperature=0.8, stream=True
                ):
                    self.tokens += 1
                    if self._stop.is_set():
                        break


def percentile(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q):.3f}" if values else "-"


def report(lines: list[Line], results: list[ModeResult]) -> None:
    print()
    print(
        f"{'mode':<10} {'lines':>5} {'words':>6} {'WER %':>6} {'finals':>6} {'unheard':>7} "
        f"{'EOS->final p50':>14} {'p95':>6} {'max':>6} {'decodes':>7} {'decode p50':>10} "
        f"{'max':>6} {'CPU s':>7} {'wall s':>7}"
    )
    for res in results:
        edits = words = 0
        for index, line in enumerate(lines):
            ref = normalise(line.text)
            edits += edit_distance(ref, normalise(" ".join(res.heard.get(index, []))))
            words += len(ref)
        unheard = sum(1 for index in range(len(lines)) if index not in res.heard)
        print(
            f"{res.mode:<10} {len(lines):>5} {words:>6} {100 * edits / max(1, words):>6.2f} "
            f"{len(res.delays):>6} {unheard:>7} {percentile(res.delays, 50):>14} "
            f"{percentile(res.delays, 95):>6} {percentile(res.delays, 100):>6} "
            f"{len(res.decodes):>7} {percentile(res.decodes, 50):>10} "
            f"{percentile(res.decodes, 100):>6} "
            f"{res.cpu_seconds:>7.1f} {res.wall_seconds:>7.1f}"
        )
    if len(results) == 2:
        print()
        print("lines transcribed differently (reference | batch | streaming):")
        a, b = results
        for index, line in enumerate(lines):
            left, right = " ".join(a.heard.get(index, [])), " ".join(b.heard.get(index, []))
            if normalise(left) != normalise(right):
                print(f"  {line.call}: {line.text!r}\n      {left!r}\n      {right!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="*.call.yaml files or folders")
    parser.add_argument("--mode", choices=["batch", "streaming", "both", "whole"], default="both")
    parser.add_argument("--cpu-threads", type=int, default=None, help="Whisper's threads")
    parser.add_argument("--beam", type=int, default=None, help="Whisper's beam width")
    parser.add_argument(
        "--interim-every", type=float, default=None, help="streaming: seconds between interims"
    )
    parser.add_argument(
        "--llm-load", action="store_true", help="keep the local LLM generating meanwhile"
    )
    parser.add_argument(
        "--full-window",
        action="store_true",
        help="encode Whisper's padded 30 s window (as before fit_window) instead of a fitted one",
    )
    parser.add_argument(
        "--temperature-fallback",
        action="store_true",
        help="sample again at rising temperatures when a decode reads as unlikely "
        "(faster-whisper's default; off in the product)",
    )
    parser.add_argument(
        "--prompt",
        default=None,
        help="whole mode: Whisper's initial prompt for every decode (the product passes "
        "none but the words of audio cut before; docs/decisions.md)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N lines")
    parser.add_argument(
        "--voice",
        default=None,
        help="callee voice for lines whose call names none (default: the replayer's Piper "
        "voice): piper, espeak[:ACCENT[+VARIANT]][:speed=WPM[-WPM]][:pitch=P[-P]]",
    )
    parser.add_argument(
        "--lines-per-call", type=int, default=None, help="only each call's first N lines"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print every final (whole mode: every line, said and heard)",
    )
    args = parser.parse_args(argv)

    if args.prompt is not None and args.mode != "whole":
        print("error: --prompt: only with --mode whole", file=sys.stderr)
        return 2
    setup_logging(verbose=False, json_logs=False)
    print(f"$ {command_line()}")
    try:
        config = load_config()
        calls = load_paths(args.paths or DEFAULT_PATHS)
        if args.voice is not None:
            check_installed(parse_voice(args.voice))
    except (ConfigError, RecordedCallError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except VoiceError as exc:
        print(f"error: --voice: {exc}", file=sys.stderr)
        return 2
    opts: dict[str, object] = {}
    if args.cpu_threads is not None:
        opts["cpu_threads"] = args.cpu_threads
    if args.beam is not None:
        opts["beam_size"] = args.beam
    if args.interim_every is not None:
        opts["interim_every"] = args.interim_every
    if args.full_window:
        opts["fit_window"] = False
    if args.temperature_fallback:
        opts["temperature_fallback"] = True
    from agent.models.whisper_stt import WhisperOptions

    shown = WhisperOptions(**opts)  # type: ignore[arg-type]
    print(
        f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        "clock: real (wall clock)"
    )
    print(
        f"whisper: tiny.en {shown.compute_type}, {shown.cpu_threads} threads, beam "
        f"{shown.beam_size}, {'fitted' if shown.fit_window else 'full 30 s'} window, "
        f"temperature {'0 to 1 (fallback)' if shown.temperature_fallback else '0 only'}; "
        f"streaming: interim every {shown.interim_every} s, trim after "
        f"{shown.trim_after} s; VAD min silence {config.turn.vad_min_silence} s"
    )
    started = time.perf_counter()
    lines = render_lines(calls, config, args.voice, args.lines_per_call)[: args.limit]
    seconds = sum(len(line.audio) for line in lines) / RATE
    print(
        f"callee speech: {len(lines)} say lines from {len(calls)} calls in "
        f"{args.voice or 'the Piper voice'}, {seconds:.0f} s of "
        f"audio with silences (rendered in {time.perf_counter() - started:.1f} s)"
    )
    if args.mode == "whole":
        result = decode_whole(lines, opts, args.prompt)
        if args.verbose:
            for index, line in enumerate(lines):
                heard = " ".join(result.heard.get(index, []))
                print(f"  {line.call}: {line.text!r}\n      {heard!r}")
        report(lines, [result])
        print(f"host load average {os.getloadavg()[0]:.2f} at end")
        return 0
    modes = ["batch", "streaming"] if args.mode == "both" else [args.mode]
    load = LlmLoad() if args.llm_load else None
    print(f"running {' and '.join(modes)}, call by call ...", flush=True)
    with load or contextlib.nullcontext():
        results = clock.run(
            run_modes(modes, lines, opts, config.turn.vad_min_silence, args.verbose),
            virtual=False,
        )
    if load is not None:
        print(f"LLM load: {load.tokens} tokens generated meanwhile")
    report(lines, results)
    print(f"host load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
