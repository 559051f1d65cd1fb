"""Synthetic call-progress signals: tones, DTMF, SIT, silence, and a tone detector.

Levels are peak levels in dBFS: a tone made of ``k`` frequencies gives each an
amplitude of ``10 ** (level_db / 20) / k``, so the sum never exceeds
``10 ** (level_db / 20)`` and never clips for ``level_db <= 0``. For ``k``
distinct frequencies the RMS level is ``level_db - 10 * log10(2 * k)`` dB (a pure
tone at -12 dBFS peak has an RMS of -15.01 dBFS; a DTMF pair at -10 dBFS peak has
an RMS of -16.02 dBFS, each of its tones -19.03 dBFS).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "DTMF_FREQUENCIES",
    "SIT_SEGMENTS",
    "dominant_frequencies",
    "dtmf_tones",
    "silence",
    "sit_tone",
    "tone",
]

RAMP_SECONDS = 0.005

# Keypad layout: rows are the low group (697..941 Hz), columns the high group.
_ROWS = (697.0, 770.0, 852.0, 941.0)
_COLS = (1209.0, 1336.0, 1477.0, 1633.0)
_KEYPAD = ("123A", "456B", "789C", "*0#D")
DTMF_FREQUENCIES: dict[str, tuple[float, float]] = {
    key: (_ROWS[r], _COLS[c]) for r, keys in enumerate(_KEYPAD) for c, key in enumerate(keys)
}
"""DTMF key -> (low, high) frequency in Hz, per ITU-T Q.23."""

SIT_SEGMENTS: tuple[tuple[float, float], ...] = ((913.8, 0.274), (1370.6, 0.274), (1776.7, 0.380))
"""The special information tone as (Hz, seconds) segments, in order."""


def _samples(seconds: float, sample_rate: int) -> int:
    if not seconds >= 0:
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate!r}")
    return round(seconds * sample_rate)


def silence(seconds: float, sample_rate: int) -> np.ndarray:
    """Returns ``round(seconds * sample_rate)`` zero samples (float32)."""
    return np.zeros(_samples(seconds, sample_rate), dtype=np.float32)


def tone(
    hz: float | Sequence[float],
    seconds: float,
    sample_rate: int,
    level_db: float | None = -12.0,
) -> np.ndarray:
    """Makes a pure or multi-frequency tone with raised-cosine edges.

    Args:
        hz: A frequency in Hz, or several for a dual (or richer) tone; each must
            lie strictly between 0 and the Nyquist frequency.
        seconds: Duration; the result has ``round(seconds * sample_rate)`` samples.
        sample_rate: Sample rate in Hz.
        level_db: Peak level of the sum in dBFS (see the module docstring for the
            RMS); None means the default, -12.

    Returns:
        Float32 samples. The first and last 5 ms (or half the tone, if shorter)
        fade in and out along a raised cosine, so the tone starts and stops
        without a click.
    """
    freqs = [float(f) for f in np.atleast_1d(np.asarray(hz, dtype=np.float64)).ravel()]
    if not freqs:
        raise ValueError("a tone needs at least one frequency")
    for f in freqs:
        if not 0 < f < sample_rate / 2:
            raise ValueError(f"tone frequency {f} Hz is outside (0, {sample_rate / 2}) Hz")
    n = _samples(seconds, sample_rate)
    level = -12.0 if level_db is None else float(level_db)
    amplitude = 10.0 ** (level / 20.0) / len(freqs)
    t = np.arange(n, dtype=np.float64) / sample_rate
    x = np.zeros(n, dtype=np.float64)
    for f in freqs:
        x += amplitude * np.sin(2 * np.pi * f * t)
    ramp = min(round(RAMP_SECONDS * sample_rate), n // 2)
    if ramp:
        edge = 0.5 - 0.5 * np.cos(np.pi * np.arange(ramp) / ramp)
        x[:ramp] *= edge
        x[n - ramp :] *= edge[::-1]
    return x.astype(np.float32)


def dtmf_tones(
    digits: str,
    sample_rate: int,
    tone_ms: float = 100,
    gap_ms: float = 60,
    level_db: float = -10.0,
) -> np.ndarray:
    """Makes the in-band audio of a DTMF key sequence.

    Args:
        digits: Keys among ``0-9``, ``*``, ``#`` and ``A-D`` (any case).
        sample_rate: Sample rate in Hz.
        tone_ms: Duration of each key's dual tone.
        gap_ms: Silence between keys (none before the first or after the last).
        level_db: Peak level of each dual tone in dBFS, as for :func:`tone`.

    Returns:
        Float32 samples; empty for no digits.

    Raises:
        ValueError: A character is not a DTMF key.
    """
    parts: list[np.ndarray] = []
    for i, key in enumerate(digits):
        if key.upper() not in DTMF_FREQUENCIES:
            raise ValueError(f"not a DTMF key at position {i}: {key!r} (expected 0-9, *, #, A-D)")
        if parts:
            parts.append(silence(gap_ms / 1000, sample_rate))
        parts.append(tone(DTMF_FREQUENCIES[key.upper()], tone_ms / 1000, sample_rate, level_db))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def sit_tone(sample_rate: int, level_db: float = -12.0) -> np.ndarray:
    """Makes the SIT tri-tone (913.8, 1370.6, 1776.7 Hz for 274, 274, 380 ms).

    Args:
        sample_rate: Sample rate in Hz.
        level_db: Peak level of each segment in dBFS.

    Returns:
        Float32 samples, 928 ms, each segment with its own 5 ms ramps.
    """
    return np.concatenate([tone(f, s, sample_rate, level_db) for f, s in SIT_SEGMENTS])


def dominant_frequencies(x: np.ndarray, sample_rate: int, n: int = 2) -> list[float]:
    """Finds the strongest spectral peaks of a signal (a test helper).

    Args:
        x: Mono samples; a few tens of milliseconds at least.
        sample_rate: Sample rate in Hz.
        n: How many peaks to return at most.

    Returns:
        Peak frequencies in Hz, strongest first, accurate to a few Hz for a
        100 ms tone. Peaks within twice the analysis window's main lobe of a
        stronger one, or 40 dB below the strongest, are skipped. Empty for
        silence.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.size < 4 or not np.any(a):
        return []
    n_fft = max(1 << int(np.ceil(np.log2(a.size * 4))), 8192)
    mag = np.abs(np.fft.rfft(a * np.hanning(a.size), n_fft))
    log_mag = np.log(mag + 1e-12)
    inner = np.arange(1, mag.size - 1)
    peaks = inner[(mag[inner] > mag[inner - 1]) & (mag[inner] >= mag[inner + 1])]
    peaks = peaks[np.argsort(mag[peaks])[::-1]]
    # Hann's main lobe spans +-2 bins of the unpadded signal; its side lobes are
    # below -31 dB and die off, so +-4 bins and a -40 dB floor leave only tones.
    lobe_bins = 4.0 * n_fft / a.size
    found: list[float] = []
    chosen: list[int] = []
    for p in peaks:
        if len(found) == n or mag[p] < mag[peaks[0]] * 1e-2:
            break
        if any(abs(p - c) < lobe_bins for c in chosen):
            continue
        left, mid, right = log_mag[p - 1], log_mag[p], log_mag[p + 1]
        denom = left - 2 * mid + right
        offset = 0.5 * (left - right) / denom if denom else 0.0
        chosen.append(int(p))
        found.append(float((p + offset) * sample_rate / n_fft))
    return found
