"""AMD phrase evidence on sentences spoken in many voices: what survives the recogniser.

Each sentence of a list is synthesised in each voice (as the replay voices a callee
line: ``espeak[:ACCENT[+VARIANT]][:speed=...]`` or ``piper``, at the line's 8 kHz,
through the replay's speech cache), decoded in one piece by the product's Whisper
(``local/whisper-tiny.en``, its default options), and the decode is classified by
the phrase packs and cue readers the AMD detector uses (``amd.phrases.classify_phrases``
on the one turn). No timing, VAD or classifier: this measures what the words alone
still say once the recogniser has had them, which is where rules for unheard voices
come from (docs/amd.md, "Fourteenth round").

A list is a text file of sentences under section headers, ``[machine-vm]``,
``[machine-ivr]``, ``[machine-unavailable]``, ``[machine-screening]``, ``[wait]`` or
``[human]``; blank lines and lines starting with ``#`` are skipped. Two lists ship in
``bench/data/amd_sentences/``: ``rules.txt``, the sentences this round's tolerances
were written from, and ``check.txt``, written apart from them to check the rules.

Prints, per voice and over all voices: machine sentences whose decode gives their
section's category (and with a strong verdict, 0.85 or more) out of those decoded,
and person sentences whose decode gives any verdict (and a strong one). ``--show``
prints every decode that missed. ``wer`` is the word error rate of the decodes
against the sentences (words compared without case or punctuation; edits over the
sentence's words, averaged over the decodes): how well the recogniser heard the
voice, apart from what the rules make of it. ``--prompt TEXT`` decodes with Whisper's
initial prompt set to ``TEXT`` (the product decodes an utterance's start with none),
to measure what a prompt would do before the recogniser is given one
(docs/decisions.md, fifteenth round). Asserts nothing and exits 0 (2 on bad arguments
or input).

Usage::

    .venv/bin/python bench/amd_sentences.py [LIST...] [--voices V[,V...]] [--show]
        [--prompt TEXT]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np

from agent.app.logs import setup_logging
from agent.telephony.audio import resample
from agent.telephony.sim.voices import VoicedSynth, VoiceError, check_installed, parse_voice

ROOT = Path(__file__).resolve().parents[1]
LISTS = ROOT / "bench" / "data" / "amd_sentences"
DEFAULT_VOICES = (
    "piper",
    "espeak:en-us+m3:speed=160-200",
    "espeak:en-029+m2:speed=130-160",
    "espeak:en-gb-x-rp+f4:speed=175-205",
)
SECTIONS = (
    "machine-vm",
    "machine-ivr",
    "machine-unavailable",
    "machine-screening",
    "wait",
    "human",
)
LINE_RATE, RATE = 8000, 16000
STRONG = 0.85


class ListError(ValueError):
    """A sentence list that cannot be read."""


@dataclass
class Sentence:
    section: str
    text: str
    where: str  # "file:line"


@dataclass
class Tally:
    machine: int = 0
    machine_right: int = 0
    machine_strong: int = 0
    human: int = 0
    human_any: int = 0
    human_strong: int = 0
    #: the word errors of every decode, summed (``wer`` divides by the decodes)
    errors: float = 0.0
    missed: list[str] = field(default_factory=list)

    @property
    def wer(self) -> float:
        decodes = self.machine + self.human
        return self.errors / decodes if decodes else 0.0

    def add(self, other: Tally) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def read_list(path: Path) -> list[Sentence]:
    """The sentences of one list file, each under its section."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ListError(f"{path}: cannot read the sentence list ({exc})") from exc
    section: str | None = None
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            if section not in SECTIONS:
                raise ListError(
                    f"{path}:{number}: section [{section}]: expected one of "
                    + ", ".join(f"[{s}]" for s in SECTIONS)
                )
            continue
        if section is None:
            raise ListError(f"{path}:{number}: a sentence before any section header")
        out.append(Sentence(section, line, f"{path.name}:{number}"))
    if not out:
        raise ListError(f"{path}: no sentences")
    return out


def _words(text: str) -> list[str]:
    return ["".join(c for c in w.lower() if c.isalnum()) for w in text.split()]


def word_error_rate(said: str, heard: str) -> float:
    """Word edits (substitutions, insertions, deletions) from ``said`` to ``heard``,
    over the words of ``said``; case and punctuation are ignored."""
    ref = [w for w in _words(said) if w]
    hyp = [w for w in _words(heard) if w]
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(1, len(ref))


def verdict(text: str) -> tuple[str | None, float]:
    """The phrase verdict on one decoded turn: its category and strength."""
    from amd.phrases import classify_phrases

    found = classify_phrases([text])
    return (None, 0.0) if found is None else (found.category, found.strength)


def run_voice(
    voice: str,
    sentences: list[Sentence],
    synth: VoicedSynth,
    whisper: object,
    prompt: str | None = None,
) -> Tally:
    tally = Tally()
    spec = parse_voice(voice)
    for index, sentence in enumerate(sentences):
        # one speaker per sentence, as one per call in a replay: the seed picks speed
        # and pitch inside the voice's ranges
        resolved = spec.resolve(f"sentence-{index}")
        line = synth.speak(sentence.text, LINE_RATE, resolved)
        audio = resample(line, LINE_RATE, RATE).astype(np.float32)
        heard = whisper.transcribe(audio, prompt=prompt).text  # type: ignore[attr-defined]
        tally.errors += word_error_rate(sentence.text, heard)
        category, strength = verdict(heard)
        if sentence.section == "human":
            tally.human += 1
            tally.human_any += category is not None
            tally.human_strong += category is not None and strength >= STRONG
            wrong = category is not None
        else:
            tally.machine += 1
            right = category == sentence.section
            tally.machine_right += right
            tally.machine_strong += right and strength >= STRONG
            wrong = not right
        if wrong:
            tally.missed.append(
                f"  {voice}  {sentence.where}  [{sentence.section}] -> {category} "
                f"{strength:.2f}: {heard!r}"
            )
    return tally


def row(name: str, tally: Tally) -> str:
    def part(n: int, d: int) -> str:
        return f"{n}/{d}" if d else "-"

    return (
        f"  {name:42s} {part(tally.machine_right, tally.machine):>9s} "
        f"{part(tally.machine_strong, tally.machine):>9s} "
        f"{part(tally.human_any, tally.human):>9s} {part(tally.human_strong, tally.human):>9s}"
        f" {tally.wer:>6.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "lists", nargs="*", type=Path, help="sentence lists (default: both shipped lists)"
    )
    parser.add_argument(
        "--voices",
        default=",".join(DEFAULT_VOICES),
        help="comma-separated voices (default: the AMD bench's four)",
    )
    parser.add_argument("--show", action="store_true", help="print every decode that missed")
    parser.add_argument(
        "--prompt", default=None, help="decode with this initial prompt (default: none)"
    )
    args = parser.parse_args(argv)
    if args.prompt is not None and not args.prompt.strip():
        print(
            "error: --prompt: expected some text (leave the option out for none)", file=sys.stderr
        )
        return 2
    setup_logging(verbose=False, json_logs=False)
    voices = [v.strip() for v in args.voices.split(",") if v.strip()]
    if not voices:
        print("error: --voices: expected at least one voice", file=sys.stderr)
        return 2
    try:
        for voice in voices:
            check_installed(parse_voice(voice))
    except VoiceError as exc:
        print(f"error: --voices: {exc}", file=sys.stderr)
        return 2
    paths = args.lists or sorted(LISTS.glob("*.txt"))
    try:
        sentences = [s for path in paths for s in read_list(path)]
    except ListError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from agent.models import build_stt
    from agent.replay.runner import default_cache_dir
    from agent.telephony.sim.voices import pick_voice

    whisper = build_stt("local/whisper-tiny.en")
    whisper.transcribe(np.zeros(RATE, np.float32))  # type: ignore[attr-defined]  # load first
    synth = VoicedSynth(default_cache_dir() / "speech", pick_voice(seed=""))
    print(f"lists: {', '.join(str(p) for p in paths)}; sentences: {len(sentences)}")
    if args.prompt is not None:
        print(f"initial prompt: {args.prompt!r}")
    print(
        f"  {'voice':42s} {'machine':>9s} {'strong':>9s} {'person':>9s} {'strong':>9s} {'wer':>6s}"
    )
    total = Tally()
    started = time.perf_counter()
    for voice in voices:
        tally = run_voice(voice, sentences, synth, whisper, args.prompt)
        print(row(voice, tally), flush=True)
        if args.show:
            print("\n".join(tally.missed))
        total.add(tally)
    print(row(f"all {len(voices)} voices", total))
    took = time.perf_counter() - started
    print(
        "machine: decodes with their section's category (strong: 0.85 or more); "
        "person: decodes with any verdict (strong: 0.85 or more); "
        f"wer: word error rate of the decodes; {took:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
