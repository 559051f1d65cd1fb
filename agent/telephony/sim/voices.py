"""Callee voices for replayed calls: Piper and espeak-ng, named by one string.

A recorded call's ``say`` lines are synthesised in a *voice*. A voice is
written as a string (``bench/amd.py --voices`` takes a comma-separated list):

* ``piper`` - the bundled Piper voice (en_US joe), as before;
* ``espeak`` or ``espeak:ACCENT[+VARIANT][:speed=S][:pitch=P]`` - espeak-ng
  (the Debian package ``espeak-ng``): ``ACCENT`` is an espeak-ng voice name
  (``en-us``, ``en-gb-scotland``, ``en-029``, ...; ``espeak-ng --voices=en``
  lists them), ``VARIANT`` one of its variants (``m3``, ``f2``, ``klatt``,
  ...; ``espeak-ng --voices=variant``), ``S`` words per minute (80-450) and
  ``P`` pitch (0-99), each a number or a range ``LOW-HIGH``.

A range (and an omitted speed or pitch: speed 150-190, pitch 30-70) is
resolved per call: the call's name picks a value in it, so every call of a
suite sounds a little different while a replay of the same call sounds the
same and its audio is found in the cache again.

A line is said in the first voice named by the line's ``voice:``, the call's
``voice:`` and the replay run (``--voices``); Piper when none is
(:func:`pick_voice`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from agent.telephony.audio import resample
from agent.telephony.sim.speech_cache import SpeechCache

__all__ = [
    "DEFAULT_VOICE",
    "SUITE_VOICES",
    "ResolvedVoice",
    "Voice",
    "VoiceError",
    "VoicedSynth",
    "check_installed",
    "espeak_voices",
    "parse_voice",
    "pick_voice",
]

DEFAULT_VOICE = "piper"
#: The voices the AMD suites are replayed in (bench/amd.py --voices, the CI audio
#: test): Piper and three espeak-ng voices, American (medium speed), Caribbean
#: (slow), British RP (female, fast); pitch and speed vary per call in each range.
SUITE_VOICES = (
    "piper",
    "espeak:en-us+m3:speed=160-200",
    "espeak:en-029+m2:speed=130-160",
    "espeak:en-gb-x-rp+f4:speed=175-205",
)
_SPEED = (150, 190)
_PITCH = (30, 70)
_SPEED_LIMITS = (80, 450)
_PITCH_LIMITS = (0, 99)
#: espeak-ng's peak level is close to full scale; speech is brought to this peak
_PEAK = 0.7

_ESPEAK_RE = re.compile(
    r"espeak(?::(?P<accent>[a-z]{2,3}(?:-[a-z0-9]+)*)(?:\+(?P<variant>[A-Za-z0-9_]+))?)?"
    r"(?P<opts>(?::[a-z]+=[0-9]+(?:-[0-9]+)?)*)"
)


class VoiceError(ValueError):
    """A voice string that cannot be used; the message says what was expected."""


@dataclass(frozen=True)
class Voice:
    """A parsed voice string (ranges not yet resolved).

    Attributes:
        engine: ``piper`` or ``espeak``.
        accent: The espeak-ng voice name (``en-us`` by default).
        variant: The espeak-ng variant, or None.
        speed: Words per minute, as an inclusive range.
        pitch: espeak-ng pitch 0-99, as an inclusive range.
        text: The string it was parsed from.
    """

    engine: str
    accent: str = "en-us"
    variant: str | None = None
    speed: tuple[int, int] = _SPEED
    pitch: tuple[int, int] = _PITCH
    text: str = DEFAULT_VOICE

    def resolve(self, seed: str) -> ResolvedVoice:
        """Picks this call's speed and pitch from the ranges, deterministically from ``seed``."""
        if self.engine == "piper":
            return ResolvedVoice("piper", "", None, 0, 0)
        digest = hashlib.sha256(f"{self.text}|{seed}".encode()).digest()
        speed = self.speed[0] + int.from_bytes(digest[:4]) % (self.speed[1] - self.speed[0] + 1)
        pitch = self.pitch[0] + int.from_bytes(digest[4:8]) % (self.pitch[1] - self.pitch[0] + 1)
        return ResolvedVoice("espeak", self.accent, self.variant, speed, pitch)


@dataclass(frozen=True)
class ResolvedVoice:
    """A voice with its speed and pitch fixed: what is synthesised and cached."""

    engine: str
    accent: str
    variant: str | None
    speed: int
    pitch: int

    @property
    def id(self) -> str:
        """Names the voice in cache keys: everything that changes the audio."""
        if self.engine == "piper":
            return "piper-joe"
        variant = f"+{self.variant}" if self.variant else ""
        return f"espeak-ng:{self.accent}{variant}:speed={self.speed}:pitch={self.pitch}"

    def synthesize(self, text: str) -> tuple[np.ndarray, int]:
        """espeak-ng speech for ``text``: (float32 mono samples, sample rate). Blocking."""
        exe = shutil.which("espeak-ng")
        if exe is None:
            raise VoiceError(
                "espeak-ng is not installed (Debian: apt-get install espeak-ng); "
                f"needed for voice {self.id!r}"
            )
        name = self.accent + (f"+{self.variant}" if self.variant else "")
        proc = subprocess.run(
            [exe, "-v", name, "-s", str(self.speed), "-p", str(self.pitch), "-b", "1", "--stdout"],
            input=text.encode("utf-8"),
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0 or not proc.stdout:
            err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:200]
            raise VoiceError(f"espeak-ng failed for voice {self.id!r}: {err or 'no audio'}")
        audio, rate = sf.read(io.BytesIO(proc.stdout), dtype="float32")
        if audio.ndim > 1:
            audio = audio.mean(axis=1)
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        if peak > 0:
            audio = audio * (_PEAK / peak)
        return audio.astype(np.float32, copy=False), int(rate)


def _range(key: str, value: str, limits: tuple[int, int], text: str) -> tuple[int, int]:
    low_s, _, high_s = value.partition("-")
    low, high = int(low_s), int(high_s or low_s)
    if not (limits[0] <= low <= high <= limits[1]):
        raise VoiceError(
            f"voice {text!r}: {key} must be a number or range LOW-HIGH within "
            f"{limits[0]}-{limits[1]}, got {value!r}"
        )
    return low, high


def parse_voice(text: str) -> Voice:
    """Parses a voice string (see the module docstring).

    Raises:
        VoiceError: The string names no engine we have or is malformed.
    """
    if not isinstance(text, str):
        raise VoiceError(f"expected a voice name such as 'piper' or 'espeak:en-gb', got {text!r}")
    text = text.strip()
    if text == "piper":
        return Voice("piper", text=text)
    m = _ESPEAK_RE.fullmatch(text)
    if m is None:
        raise VoiceError(
            f"unknown voice {text!r}: expected 'piper' or "
            "'espeak[:ACCENT[+VARIANT]][:speed=WPM][:pitch=0-99]'"
        )
    speed, pitch = _SPEED, _PITCH
    for opt in filter(None, m.group("opts").split(":")):
        key, _, value = opt.partition("=")
        if key == "speed":
            speed = _range(key, value, _SPEED_LIMITS, text)
        elif key == "pitch":
            pitch = _range(key, value, _PITCH_LIMITS, text)
        else:
            raise VoiceError(f"voice {text!r}: unknown option {key!r} (expected speed or pitch)")
    return Voice(
        "espeak",
        accent=m.group("accent") or "en-us",
        variant=m.group("variant"),
        speed=speed,
        pitch=pitch,
        text=text,
    )


@functools.cache
def espeak_voices() -> tuple[frozenset[str], frozenset[str]]:
    """The installed espeak-ng voice names and variant names (empty when not installed)."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        return frozenset(), frozenset()

    def names(arg: str) -> frozenset[str]:
        out = subprocess.run([exe, arg], capture_output=True, text=True, check=False).stdout
        found: set[str] = set()
        for line in out.splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 5:
                found.add(cols[1])
                found.add(cols[4].rsplit("/", 1)[-1])
        return frozenset(found)

    return names("--voices"), names("--voices=variant")


# Piper's lines in the speech cache: seeded renders (piper_line), apart from the unseeded
# ones that were cached as "piper-joe" before
PIPER_CACHE_ID = "piper-joe:seeded"


def piper_line(text: str, sample_rate: int) -> np.ndarray:
    """Piper's rendering of a callee line: float32 mono at ``sample_rate``. Blocking.

    Seeded by the text, so a line sounds the same in every call, every run and on every
    machine like this one. Piper draws its prosody noise afresh on each render otherwise,
    and a replay's recogniser could hear another word on the next clean checkout.
    """
    from agent.models.piper_tts import load_piper_voice, synthesize_pcm

    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") >> 1
    # rendered at the voice's rate and resampled in float here: the int16 resampler
    # synthesize_pcm uses dithers, which would change the last bits on every render
    native = load_piper_voice().config.sample_rate
    return resample(synthesize_pcm(text, native, seed=seed), native, sample_rate)


def piper_cache(root: Path) -> SpeechCache:
    """The simulator's Piper voice (the replayer's default) with its disk cache in ``root``."""
    return SpeechCache(root, piper_line, voice_id=PIPER_CACHE_ID)


class VoicedSynth:
    """A simulator synthesiser (``synth(text, rate)``) that speaks in the current voice.

    Set :attr:`voice` (a :class:`ResolvedVoice`) before each call is prepared;
    each voice has its own :class:`SpeechCache` under ``root``, keyed by
    :attr:`ResolvedVoice.id`, so voices never share audio.

    Args:
        root: The speech cache folder.
        voice: The voice to start with.
    """

    def __init__(self, root: Path, voice: ResolvedVoice) -> None:
        self.root = Path(root)
        self.voice = voice
        self._caches: dict[str, SpeechCache] = {}

    def _cache(self, voice: ResolvedVoice) -> SpeechCache:
        cache = self._caches.get(voice.id)
        if cache is None:
            if voice.engine == "piper":
                cache = piper_cache(self.root)
            else:

                def render(text: str, rate: int) -> np.ndarray:
                    audio, native = voice.synthesize(text)
                    return resample(audio, native, rate)

                cache = SpeechCache(self.root, render, voice_id=voice.id)
            self._caches[voice.id] = cache
        return cache

    def __call__(self, text: str, sample_rate: int) -> np.ndarray:
        return self._cache(self.voice).get(text, sample_rate)

    def speak(self, text: str, sample_rate: int, voice: ResolvedVoice) -> np.ndarray:
        """``text`` in ``voice`` (cached), whatever :attr:`voice` is. Blocking."""
        return self._cache(voice).get(text, sample_rate)


def pick_voice(*choices: str | None, seed: str) -> ResolvedVoice:
    """The first voice string in ``choices`` that is not None (Piper if none), for one call.

    Args:
        choices: Voice strings, most specific first: the line's, the call's, the run's.
        seed: The call's name: it picks speed and pitch inside the chosen voice's
            ranges, so every line a voice says in one call sounds like one speaker.

    Raises:
        VoiceError: The chosen string is not a voice.
    """
    text = next((c for c in choices if c is not None), DEFAULT_VOICE)
    return parse_voice(text).resolve(seed)


def check_installed(voice: Voice) -> None:
    """Raises :class:`VoiceError` when ``voice`` needs espeak-ng or a voice it does not have."""
    if voice.engine != "espeak":
        return
    names, variants = espeak_voices()
    if not names:
        raise VoiceError(
            f"voice {voice.text!r} needs espeak-ng, which is not installed "
            "(Debian: apt-get install espeak-ng)"
        )
    if voice.accent not in names:
        raise VoiceError(
            f"voice {voice.text!r}: espeak-ng has no voice {voice.accent!r} "
            "(espeak-ng --voices lists them)"
        )
    if voice.variant is not None and voice.variant not in variants:
        # espeak-ng names a variant by its file, case and all ("steph" for "Steph"),
        # and says an unknown one in the plain voice without a word
        near = sorted(v for v in variants if v.lower() == voice.variant.lower())
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise VoiceError(
            f"voice {voice.text!r}: espeak-ng has no variant {voice.variant!r} "
            f"(espeak-ng --voices=variant lists them by file, the last column){hint}"
        )
