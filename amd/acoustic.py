"""Streaming acoustic evidence for answering-machine detection.

Three pure, synchronous detectors fed float32 mono frames (any size, any rate
>= 8 kHz) with the time of each frame's first sample, in seconds from the answer:

* :class:`BeepDetector` reports a voicemail beep (a stable single or dual tone
  of 400-2,000 Hz lasting at least 150 ms) when it ends, with its end time: a
  message must start after it.
* :class:`SitDetector` reports the special information tone tri-tone.
* :class:`GreetingTimer` measures the greeting the way Asterisk's AMD does;
  :func:`timing_verdict` and :func:`short_greeting_then_silence` decide on it.

Frames are re-cut into 20 ms hops; each hop runs one FFT over the last ~32 ms
(a Hann window, a power-of-two length), so timing resolution is 20 ms before
the edge interpolation described in :class:`BeepDetector`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = [
    "BeepDetector",
    "BeepEvent",
    "GreetingFeatures",
    "GreetingTimer",
    "SitDetector",
    "SitEvent",
    "TimingConfig",
    "short_greeting_then_silence",
    "timing_verdict",
]

HOP_SECONDS = 0.02
_DTMF_LOW = (697.0, 770.0, 852.0, 941.0)
_DTMF_HIGH = (1209.0, 1336.0, 1477.0, 1633.0)
_SIT_FIRST = (913.8, 985.2)
_SIT_SECOND = (1370.6, 1428.5)
_SIT_THIRD = (1776.7,)
_SIT_SHORT, _SIT_LONG = 0.274, 0.380
_LOBE = 3  # bins either side of a peak counted as the peak (Hann main lobe is +-2)


@dataclass(frozen=True)
class BeepEvent:
    """A tone that ended.

    Attributes:
        start: When the tone started, seconds (same clock as ``push``'s ``t``).
        end: When it ended; nothing after the beep starts before this.
        hz: Its frequency, or two frequencies (ascending) for a dual tone.
    """

    start: float
    end: float
    hz: tuple[float, ...]

    @property
    def dual(self) -> bool:
        """Whether the tone is made of two frequencies."""
        return len(self.hz) == 2


@dataclass(frozen=True)
class SitEvent:
    """A special information tone tri-tone.

    Attributes:
        start: Start of the first segment, seconds.
        end: End of the third segment, seconds.
        hz: The three measured segment frequencies.
    """

    start: float
    end: float
    hz: tuple[float, float, float]


class _Hopper:
    """Re-cuts pushed frames into fixed hops and keeps their timeline."""

    def __init__(self, sample_rate: int) -> None:
        if sample_rate < 8000:
            raise ValueError(f"sample_rate must be >= 8000, got {sample_rate!r}")
        self.sample_rate = int(sample_rate)
        self.hop = round(HOP_SECONDS * sample_rate)
        self._pending = np.zeros(0, dtype=np.float32)
        self._origin: float | None = None  # time of sample 0
        self._consumed = 0  # samples handed out as hops

    def hops(self, frame: np.ndarray, t: float | None) -> list[tuple[np.ndarray, float]]:
        """Returns (hop samples, hop end time) for every complete hop."""
        x = np.asarray(frame, dtype=np.float32).ravel()
        queued = self._consumed + self._pending.size
        if t is not None:
            self._origin = t - queued / self.sample_rate
        elif self._origin is None:
            self._origin = 0.0
        buf = np.concatenate((self._pending, x)) if self._pending.size else x
        out = []
        n = buf.size // self.hop
        for i in range(n):
            self._consumed += self.hop
            out.append((buf[i * self.hop : (i + 1) * self.hop], self.time(self._consumed)))
        self._pending = buf[n * self.hop :].copy()
        return out

    def time(self, sample: int) -> float:
        return (self._origin or 0.0) + sample / self.sample_rate


@dataclass
class _Run:
    refs: list[float]  # reference peak bins
    windows: int = 0
    audio: list[np.ndarray] = field(default_factory=list)
    edges: list[tuple[float, float]] = field(default_factory=list)  # (centre, region energy)


class _ToneTracker:
    """Finds runs of tonal analysis windows with stable peaks (shared by the detectors)."""

    def __init__(
        self, sample_rate: int, low_hz: float, high_hz: float, concentration: float
    ) -> None:
        self._hopper = _Hopper(sample_rate)
        sr = self._hopper.sample_rate
        self.n = 1 << round(np.log2(0.032 * sr))
        self.bin_hz = sr / self.n
        self._win = np.hanning(self.n).astype(np.float32)
        self._buf = np.zeros(self.n, dtype=np.float32)
        self._lo = max(1, int(min(300.0, low_hz * 0.8) / self.bin_hz))
        self._hi = min(self.n // 2, int(min(3400.0, sr / 2 * 0.85) / self.bin_hz) + 1)
        self.concentration = concentration
        # -60 dBFS RMS in the band: quieter windows are never tonal.
        self._min_power = (10 ** (-60 / 10)) * (self.n * 0.375) * self.n / 2
        self._prev: np.ndarray | None = None
        self._run: _Run | None = None
        self._fill = 0

    def push(self, frame: np.ndarray, t: float | None) -> list[tuple[float, float, list[float]]]:
        """Returns (start, end, frequencies) of every run that ended."""
        ended = []
        for hop, t_end in self._hopper.hops(frame, t):
            k = hop.size
            if k >= self.n:
                self._buf = hop[-self.n :].copy()
            else:
                self._buf[:-k] = self._buf[k:]
                self._buf[-k:] = hop
            self._fill = min(self.n, self._fill + k)
            r = self._step(hop, t_end - self.n / 2 / self._hopper.sample_rate)
            if r is not None:
                ended.append(r)
        return ended

    def _region(self, p: np.ndarray, refs: list[float]) -> float:
        total = 0.0
        for b in refs:
            c = round(b)
            total += float(p[max(c - _LOBE, 0) : c + _LOBE + 1].sum())
        return total

    def _peaks(self, p: np.ndarray) -> list[float] | None:
        total = float(p.sum())
        if total < self._min_power:
            return None
        k1 = int(np.argmax(p))
        e1 = float(p[max(k1 - _LOBE, 0) : k1 + _LOBE + 1].sum())
        q = p.copy()
        q[max(k1 - _LOBE, 0) : k1 + _LOBE + 1] = 0.0
        k2 = int(np.argmax(q))
        e2 = float(q[max(k2 - _LOBE, 0) : k2 + _LOBE + 1].sum())
        dual = e2 >= 0.1 * e1
        if (e1 + e2 if dual else e1) < self.concentration * total:
            return None
        peaks = [self._interp(p, k1)]
        if dual:
            peaks.append(self._interp(p, k2))
        return peaks

    def _interp(self, p: np.ndarray, k: int) -> float:
        if 0 < k < p.size - 1:
            a, b, c = np.log(p[k - 1 : k + 2] + 1e-20)
            d = a - 2 * b + c
            # a parabola through a bin and its neighbours peaks within half a bin of
            # it, and only if the bin tops them: the second peak is found with the
            # first one's lobe cleared, so a neighbour may be louder (d >= 0), and an
            # unbounded vertex once put a voice's "tone" at a negative bin whose
            # region spanned the whole spectrum and never ended
            if d < 0:
                return float(self._lo + k + float(np.clip(0.5 * (a - c) / d, -0.5, 0.5)))
        return float(self._lo + k)

    def _matches(self, run: _Run, peaks: list[float]) -> bool:
        tol = 1.5
        return all(any(abs(f - r) <= tol for r in run.refs) for f in peaks)

    def _step(self, hop: np.ndarray, centre: float) -> tuple[float, float, list[float]] | None:
        p = np.zeros(self.n // 2 + 1)
        # digital silence (a text-only replay's line, padding) has an all-zero spectrum
        if self._buf.any():
            band = np.fft.rfft(self._buf * self._win)[self._lo : self._hi]
            p[self._lo : self._hi] = band.real**2 + band.imag**2
        pb = p[self._lo : self._hi]
        peaks = self._peaks(pb) if self._fill == self.n else None
        result = None
        run = self._run
        if run is not None:
            region = self._region(p, run.refs)
            # Beating dual tones move the strongest peak about; energy that stays
            # at the run's peaks keeps the run going.
            total = float(pb.sum())
            held = total >= self._min_power and region >= self.concentration * total
            if held or (
                peaks is not None
                and (
                    self._matches(run, peaks)
                    or (run.windows <= 2 and len(run.refs) == 1 and len(peaks) == 2)
                )
            ):
                if peaks is not None and len(peaks) > len(run.refs):
                    run.refs = sorted(peaks)
                run.windows += 1
                run.audio.append(hop)
                run.edges.append((centre, self._region(p, run.refs)))
            else:
                run.edges.append((centre, region))
                result = self._finish(run)
                self._run = run = None
        if run is None and peaks is not None:
            run = _Run(refs=sorted(peaks), windows=1, audio=[hop])
            prev = self._prev
            step = self._hopper.hop / self._hopper.sample_rate
            run.edges.append(
                (centre - step, self._region(prev, run.refs) if prev is not None else 0)
            )
            run.edges.append((centre, self._region(p, run.refs)))
            self._run = run
        self._prev = p
        return result

    def _finish(self, run: _Run) -> tuple[float, float, list[float]] | None:
        if run.windows < 3:
            return None
        centres = [c for c, _ in run.edges]
        energy = [e for _, e in run.edges]
        # Half the median level: a beating dual tone's peaks would bias a maximum.
        half = 0.5 * float(np.median(energy[1:-1]))
        start, end = centres[1], centres[-2]
        for i in range(1, len(energy)):
            if energy[i] >= half:
                e0, e1 = energy[i - 1], energy[i]
                # e0 >= half: the tone began inside a window that was not tonal.
                frac = (half - e0) / (e1 - e0) if half > e0 else 0.0
                start = centres[i - 1] + frac * (centres[i] - centres[i - 1])
                break
        for i in range(len(energy) - 2, -1, -1):
            if energy[i] >= half:
                e0, e1 = energy[i], energy[i + 1]
                # at most the next window: a run cut off by a change of spectrum (a
                # voice's harmonic that held for three windows) may still be loud
                # there, and a line through two loud points reaches far past the run
                frac = min((e0 - half) / (e0 - e1), 1.0) if e0 > e1 else 1.0
                end = centres[i] + frac * (centres[i + 1] - centres[i])
                break
        return start, end, _frequencies(np.concatenate(run.audio), self._hopper.sample_rate)


def _frequencies(x: np.ndarray, sample_rate: int, low_hz: float = 50.0) -> list[float]:
    """Returns the one or two strong frequencies of a tone, ascending.

    The whole spectrum above ``low_hz`` is searched, so a voice's fundamental below
    the beep band (the strongest part of most vowels) is what a run of speech
    reports, and the beep checks reject it. A line's DC offset is removed first,
    and a slow rumble stays below ``low_hz``: at 0 Hz either can outweigh the tone.
    """
    x = x - float(np.mean(x))
    n_fft = max(1 << int(np.ceil(np.log2(x.size * 4))), 8192)
    mag = np.abs(np.fft.rfft(x * np.hanning(x.size), n_fft))
    # the peaks are searched from low_hz to the bin before the last, so each has
    # a neighbour on both sides for the interpolation
    lo = max(1, int(low_hz * n_fft / sample_rate))
    band = mag[lo:-1]
    lobe = int(4.0 * n_fft / x.size) + 1
    b1 = int(np.argmax(band))
    q = band.copy()
    q[max(b1 - lobe, 0) : b1 + lobe + 1] = 0.0
    b2 = int(np.argmax(q))
    found = [lo + b1] + ([lo + b2] if q[b2] > 0 and q[b2] >= 0.25 * band[b1] else [])
    hz = []
    logm = np.log(mag + 1e-12)
    for k in found:
        a, b, c = logm[k - 1 : k + 2]
        d = a - 2 * b + c
        hz.append(float((k + (0.5 * (a - c) / d if d else 0.0)) * sample_rate / n_fft))
    return sorted(hz)


def _near(f: float, table: tuple[float, ...], rel: float) -> bool:
    return any(abs(f - g) <= rel * g for g in table)


class BeepDetector:
    """Detects a voicemail beep: a stable tone, single or dual, that lasts.

    A hop is tonal when one or two narrow spectral peaks (+-3 bins each) hold
    ``concentration`` of the 300-3,400 Hz energy; consecutive tonal hops whose
    peaks stay within 1.5 bins form a run. When a run ends, its edges are the
    points where the energy at its peaks crosses half its median (interpolated
    between hops), and its frequencies come from one long FFT over the run.
    Speech is rejected by the concentration and stability tests and by the
    minimum duration; DTMF digits by their frequency pairs (and length).

    Args:
        sample_rate: Sample rate of the frames, >= 8000.
        min_seconds: Shortest beep.
        low_hz: Lowest beep frequency (every frequency of a dual tone counts).
        high_hz: Highest beep frequency.
        dual_low_hz: Lowest frequency of a dual tone (350 + 440 Hz is common).
        concentration: Fraction of the band's energy the peaks must hold.
        reject_dtmf: Never report a DTMF frequency pair.
    """

    def __init__(
        self,
        sample_rate: int,
        min_seconds: float = 0.15,
        low_hz: float = 400.0,
        high_hz: float = 2000.0,
        *,
        dual_low_hz: float = 300.0,
        concentration: float = 0.9,
        reject_dtmf: bool = True,
    ) -> None:
        self.min_seconds = min_seconds
        self.dual_low_hz = dual_low_hz
        self.low_hz, self.high_hz = low_hz, high_hz
        self.reject_dtmf = reject_dtmf
        self._tracker = _ToneTracker(sample_rate, min(low_hz, dual_low_hz), high_hz, concentration)

    @property
    def tone_seconds(self) -> float:
        """How long the tone being heard right now has lasted (0.0 when none)."""
        run = self._tracker._run
        return run.windows * HOP_SECONDS if run is not None else 0.0

    def push(self, frame: np.ndarray, t: float | None = None) -> list[BeepEvent]:
        """Feeds one frame; returns the beeps that ended in it.

        Args:
            frame: Float32 mono samples in [-1, 1].
            t: Time of the frame's first sample in seconds; None continues
                from the previous frame (0 for the first).
        """
        events = []
        for start, end, hz in self._tracker.push(frame, t):
            if end - start < self.min_seconds:
                continue
            low = min(self.low_hz, self.dual_low_hz) if len(hz) == 2 else self.low_hz
            if not all(low * 0.97 <= f <= self.high_hz * 1.03 for f in hz):
                continue
            if (
                self.reject_dtmf
                and len(hz) == 2
                and _near(hz[0], _DTMF_LOW, 0.025)
                and _near(hz[1], _DTMF_HIGH, 0.025)
            ):
                continue
            events.append(BeepEvent(start=start, end=end, hz=tuple(hz)))
        return events


class SitDetector:
    """Detects the special information tone (913.8 / 1,370.6 / 1,776.7 Hz).

    Accepts the ITU/Telcordia variants (first segment 913.8 or 985.2 Hz, second
    1,370.6 or 1,428.5 Hz, third 1,776.7 Hz), each within ``tolerance_hz``, with
    segments of 274 or 380 ms within ``timing_tolerance`` and gaps up to
    ``max_gap`` seconds.

    Args:
        sample_rate: Sample rate of the frames, >= 8000.
        tolerance_hz: Allowed frequency error per segment.
        timing_tolerance: Allowed relative error of a segment's length.
        max_gap: Longest silence between segments, seconds.
    """

    def __init__(
        self,
        sample_rate: int,
        tolerance_hz: float = 20.0,
        timing_tolerance: float = 0.4,
        max_gap: float = 0.1,
    ) -> None:
        self.tolerance_hz = tolerance_hz
        self.max_gap = max_gap
        self._shortest = _SIT_SHORT * (1 - timing_tolerance)
        self._longest = _SIT_LONG * (1 + timing_tolerance)
        self._tracker = _ToneTracker(sample_rate, 800.0, 1900.0, 0.9)
        self._segments: deque[tuple[float, float, float]] = deque(maxlen=3)

    def push(self, frame: np.ndarray, t: float | None = None) -> list[SitEvent]:
        """Feeds one frame; returns the SITs whose last segment ended in it.

        Args:
            frame: Float32 mono samples in [-1, 1].
            t: Time of the frame's first sample in seconds; None continues.
        """
        events = []
        for start, end, hz in self._tracker.push(frame, t):
            if len(hz) != 1 or not self._shortest <= end - start <= self._longest:
                self._segments.clear()
                continue
            self._segments.append((start, end, hz[0]))
            if len(self._segments) == 3 and self._is_sit():
                (s0, _, f0), (_, _, f1), (_, e2, f2) = self._segments
                events.append(SitEvent(start=s0, end=e2, hz=(f0, f1, f2)))
                self._segments.clear()
        return events

    def _is_sit(self) -> bool:
        segs = list(self._segments)
        tables = (_SIT_FIRST, _SIT_SECOND, _SIT_THIRD)
        for (_, _, f), table in zip(segs, tables, strict=True):
            if not any(abs(f - g) <= self.tolerance_hz for g in table):
                return False
        return all(b[0] - a[1] <= self.max_gap for a, b in zip(segs, segs[1:], strict=False))


@dataclass(frozen=True)
class TimingConfig:
    """Greeting-timing thresholds, in seconds; defaults are Asterisk AMD's.

    Attributes:
        initial_silence: Silence from the answer to the first word -> machine.
        greeting: Voiced time of the greeting beyond which -> machine.
        after_greeting_silence: Silence after a greeting -> human.
        total_analysis_time: Past this, an undecided call is "uncertain".
        min_word_length: Voice needed to count a word.
        between_words_silence: Silence that ends a word.
        max_words: This many words -> machine.
        silence_threshold_db: Speech is this far above the noise floor.
        min_speech_db: Speech is never quieter than this (dBFS RMS).
        noise_window: Seconds over which the noise floor is the minimum.
    """

    initial_silence: float = 2.5
    greeting: float = 1.5
    after_greeting_silence: float = 0.8
    total_analysis_time: float = 5.0
    min_word_length: float = 0.1
    between_words_silence: float = 0.05
    max_words: int = 4
    silence_threshold_db: float = 10.0
    min_speech_db: float = -50.0
    noise_window: float = 1.5


@dataclass(frozen=True)
class GreetingFeatures:
    """What the greeting timer has measured so far (seconds from the answer).

    Attributes:
        elapsed: Audio heard since the answer.
        initial_silence: Silence before the first word (so far, if none yet).
        words: Speech bursts of at least ``min_word_length``.
        voice_seconds: Voiced time since the first word started.
        greeting_seconds: From the first word's start to the last word's end
            (or now, while a word goes on).
        trailing_silence: Silence since the last word ended; 0 while speaking
            or before any word.
        speaking: Whether the latest hop is speech.
    """

    elapsed: float = 0.0
    initial_silence: float = 0.0
    words: int = 0
    voice_seconds: float = 0.0
    greeting_seconds: float = 0.0
    trailing_silence: float = 0.0
    speaking: bool = False


class GreetingTimer:
    """Times the callee's greeting from the answer, as Asterisk's AMD does.

    Each 20 ms hop is speech when its RMS level is ``silence_threshold_db`` above
    the noise floor (the quietest hop of the last ``noise_window`` seconds) and
    above ``min_speech_db``. A word is ``min_word_length`` of speech; it ends
    after ``between_words_silence`` of silence.

    Args:
        sample_rate: Sample rate of the frames, >= 8000.
        config: Thresholds.
    """

    def __init__(self, sample_rate: int, config: TimingConfig | None = None) -> None:
        self.config = config or TimingConfig()
        self._hopper = _Hopper(sample_rate)
        self._hop_s = self._hopper.hop / self._hopper.sample_rate
        self._levels: deque[float] = deque(maxlen=max(1, round(self.config.noise_window / 0.02)))
        self._elapsed = 0.0
        self._voice_run = 0.0  # consecutive speech
        self._silence_run = 0.0  # consecutive silence
        self._in_word = False
        self._words = 0
        self._first_word: float | None = None
        self._last_word_end: float | None = None
        self._voice = 0.0
        self._speaking = False

    @property
    def features(self) -> GreetingFeatures:
        """The measurements so far."""
        e = self._elapsed
        first = self._first_word
        if first is None:
            return GreetingFeatures(elapsed=e, initial_silence=e, speaking=self._speaking)
        end = e if self._in_word or self._last_word_end is None else self._last_word_end
        trailing = 0.0 if self._in_word else e - (self._last_word_end or e)
        return GreetingFeatures(
            elapsed=e,
            initial_silence=first,
            words=self._words,
            voice_seconds=self._voice,
            greeting_seconds=end - first,
            trailing_silence=trailing,
            speaking=self._speaking,
        )

    def push(self, frame: np.ndarray) -> GreetingFeatures:
        """Feeds the next frame of the callee's audio; returns the features."""
        cfg = self.config
        for hop, _ in self._hopper.hops(frame, None):
            level = 10 * float(np.log10(float(np.mean(hop * hop)) + 1e-12))
            self._levels.append(level)
            floor = min(self._levels)
            speech = level >= max(floor + cfg.silence_threshold_db, cfg.min_speech_db)
            self._speaking = speech
            start = self._elapsed
            self._elapsed += self._hop_s
            if speech:
                self._silence_run = 0.0
                self._voice_run += self._hop_s
                if self._first_word is not None:
                    self._voice += self._hop_s
                if not self._in_word and self._voice_run >= cfg.min_word_length - 1e-9:
                    self._in_word = True
                    self._words += 1
                    word_start = start + self._hop_s - self._voice_run
                    if self._first_word is None:
                        self._first_word = word_start
                        self._voice = self._voice_run
            else:
                self._silence_run += self._hop_s
                if self._silence_run >= cfg.between_words_silence - 1e-9:
                    self._voice_run = 0.0
                    if self._in_word:
                        self._in_word = False
                        self._last_word_end = self._elapsed - self._silence_run
        return self.features


def timing_verdict(
    features: GreetingFeatures, config: TimingConfig | None = None
) -> tuple[Literal["human", "machine", "uncertain"], str]:
    """Decides on greeting timing alone, in Asterisk AMD's order.

    Args:
        features: From :class:`GreetingTimer`.
        config: Thresholds; the timer's defaults when None.

    Returns:
        ``("machine", reason)`` for a long initial silence, too many words or a
        long greeting; ``("human", reason)`` for silence after a greeting;
        otherwise ``("uncertain", reason)`` (``"timeout"`` past the analysis
        time, ``"undecided"`` before).
    """
    cfg = config or TimingConfig()
    f = features
    if f.words == 0 and f.initial_silence >= cfg.initial_silence:
        return "machine", "initial_silence"
    if f.words >= cfg.max_words:
        return "machine", "max_words"
    if f.voice_seconds >= cfg.greeting:
        return "machine", "long_greeting"
    if f.words > 0 and f.trailing_silence >= cfg.after_greeting_silence:
        return "human", "after_greeting_silence"
    if f.elapsed >= cfg.total_analysis_time:
        return "uncertain", "timeout"
    return "uncertain", "undecided"


def short_greeting_then_silence(
    features: GreetingFeatures,
    max_greeting: float = 1.2,
    max_words: int = 3,
    min_silence: float = 0.7,
) -> bool:
    """The "Hello?" rule: a short greeting, then the callee waits for us.

    Args:
        features: From :class:`GreetingTimer`.
        max_greeting: Longest greeting span, seconds.
        max_words: Most words.
        min_silence: Silence after the greeting needed, seconds.

    Returns:
        True when 1..``max_words`` words spanning at most ``max_greeting`` are
        followed by at least ``min_silence`` of silence.
    """
    f = features
    return (
        0 < f.words <= max_words
        and f.greeting_seconds <= max_greeting
        and f.trailing_silence >= min_silence
    )
