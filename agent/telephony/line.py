"""A telephone line model: band limit, G.711 companding and a noise floor.

The callee's audio in a recorded call goes through this before the runtime hears
it, so the agent gets what a real trunk would deliver: speech resampled through
the line rate (8 kHz: flat to 3.4 kHz, -70 dB from 4 kHz up), quantised by a G.711
μ-law (PCMU) or A-law (PCMA) encode/decode round trip, plus white noise.

The G.711 coders are the segment/quantisation coders of ITU-T G.711, bit-exact
with the Sun reference coder (the one in Python's former ``audioop``), working on
16-bit linear PCM as it does: μ-law uses the top 14 bits, A-law the top 13.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent.telephony.audio import (
    Decimator,
    Interpolator,
    from_int16,
    lowpass_fir,
    resample,
    to_int16,
)

__all__ = [
    "Codec",
    "LineChannel",
    "LineModel",
    "alaw_decode",
    "alaw_encode",
    "ulaw_decode",
    "ulaw_encode",
]

Codec = Literal["none", "pcmu", "pcma"]

# Upper ends of the eight segments (ITU-T G.711 tables 1a and 2a).
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)
_ULAW_BIAS = 0x84
_ULAW_CLIP = 8159


def _ulaw_encode_exact(pcm: np.ndarray) -> np.ndarray:
    v = np.asarray(pcm, dtype=np.int32) >> 2
    mask = np.where(v < 0, 0x7F, 0xFF)
    mag = np.minimum(np.abs(v), _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, mag, side="left")
    code = np.where(seg > 7, 0x7F, (seg << 4) | ((mag >> (seg + 1)) & 0xF))
    return (code ^ mask).astype(np.uint8)


def _alaw_encode_exact(pcm: np.ndarray) -> np.ndarray:
    v = np.asarray(pcm, dtype=np.int32) >> 3
    negative = v < 0
    mask = np.where(negative, 0x55, 0xD5)
    mag = np.where(negative, -v - 1, v)
    seg = np.searchsorted(_ALAW_SEG_END, mag, side="left")
    code = np.where(seg > 7, 0x7F, (seg << 4) | ((mag >> np.maximum(seg, 1)) & 0xF))
    return (code ^ mask).astype(np.uint8)


def _ulaw_decode_exact(codes: np.ndarray) -> np.ndarray:
    u = ~np.asarray(codes, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + _ULAW_BIAS) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def _alaw_decode_exact(codes: np.ndarray) -> np.ndarray:
    a = np.asarray(codes, dtype=np.int32) ^ 0x55
    seg = (a & 0x70) >> 4
    t = (a & 0x0F) << 4
    t = np.where(seg == 0, t + 8, (t + 0x108) << np.maximum(seg - 1, 0))
    return np.where(a & 0x80, t, -t).astype(np.int16)


# Lookup tables: the encoders indexed by pcm + 32768, the decoders by code.
_ALL_PCM = np.arange(-32768, 32768, dtype=np.int32)
_ALL_CODES = np.arange(256, dtype=np.int32)
_ULAW_ENC = _ulaw_encode_exact(_ALL_PCM)
_ALAW_ENC = _alaw_encode_exact(_ALL_PCM)
_ULAW_DEC = _ulaw_decode_exact(_ALL_CODES)
_ALAW_DEC = _alaw_decode_exact(_ALL_CODES)
_ROUND_TRIP = {
    "pcmu": from_int16(_ULAW_DEC[_ULAW_ENC]),
    "pcma": from_int16(_ALAW_DEC[_ALAW_ENC]),
}


def ulaw_encode(pcm: np.ndarray) -> np.ndarray:
    """Encodes 16-bit linear PCM to G.711 μ-law codes (uint8; 0 encodes to 0xFF)."""
    return _ULAW_ENC[np.asarray(pcm, dtype=np.int16).astype(np.int32) + 32768]


def ulaw_decode(codes: np.ndarray) -> np.ndarray:
    """Decodes G.711 μ-law codes to 16-bit linear PCM (int16)."""
    return _ULAW_DEC[np.asarray(codes, dtype=np.uint8)]


def alaw_encode(pcm: np.ndarray) -> np.ndarray:
    """Encodes 16-bit linear PCM to G.711 A-law codes (uint8; 0 encodes to 0xD5)."""
    return _ALAW_ENC[np.asarray(pcm, dtype=np.int16).astype(np.int32) + 32768]


def alaw_decode(codes: np.ndarray) -> np.ndarray:
    """Decodes G.711 A-law codes to 16-bit linear PCM (int16)."""
    return _ALAW_DEC[np.asarray(codes, dtype=np.uint8)]


@dataclass(frozen=True)
class LineModel:
    """How a telephone line degrades the audio that crosses it.

    Attributes:
        sample_rate: The line's sample rate in Hz. Audio is low-pass filtered
            (flat to 85% of the line's Nyquist frequency, -70 dB from Nyquist
            up: 3.4 kHz / 4 kHz for an 8 kHz line) and resampled through it.
        codec: ``"none"``, or ``"pcmu"`` / ``"pcma"`` for a G.711 μ-law / A-law
            encode-decode round trip at the line rate.
        noise_db: Level of added white noise as RMS in dBFS (an RMS of
            ``10 ** (noise_db / 20)`` relative to full scale 1.0, measured at the
            output), or None for none. It is added at the line rate before the
            codec, like noise on the analogue side of a trunk, so it is
            band-limited like the speech.
        seed: Seed of the noise generator. Every channel (and every ``apply``)
            starts from it, so the same input always gives the same output.
    """

    sample_rate: int = 8000
    codec: Codec = "none"
    noise_db: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if int(self.sample_rate) != self.sample_rate or self.sample_rate <= 0:
            raise ValueError(
                f"line sample_rate must be a positive integer, got {self.sample_rate!r}"
            )
        if self.codec not in ("none", "pcmu", "pcma"):
            raise ValueError(f"line codec must be none, pcmu or pcma, got {self.codec!r}")
        if self.noise_db is not None and not self.noise_db <= 0:
            raise ValueError(f"line noise_db must be a level in dBFS <= 0, got {self.noise_db!r}")

    def channel(self, sample_rate: int) -> LineChannel:
        """Starts streaming a signal at ``sample_rate`` Hz through this line.

        Args:
            sample_rate: A whole multiple of the line's sample rate.
        """
        return LineChannel(self, sample_rate)

    def apply(self, x: np.ndarray, sample_rate: int) -> np.ndarray:
        """Passes a whole signal through the line, without delay.

        Any sample rate works; one that is not a multiple of the line rate is
        carried to and from the next multiple up by :func:`resample`.

        Args:
            x: Mono samples in [-1, 1].
            sample_rate: Sample rate of ``x``; the output has the same rate.

        Returns:
            ``len(x)`` float32 samples in [-1, 1], time-aligned with ``x``.
        """
        line_rate = int(self.sample_rate)
        work_rate = line_rate * -(-int(sample_rate) // line_rate)
        a = resample(x, sample_rate, work_rate) if work_rate != sample_rate else x
        ch = LineChannel(self, work_rate)
        y = np.concatenate([ch.process(a), ch.flush()])[ch.latency :]
        if work_rate == sample_rate:
            return y
        y = resample(y, work_rate, sample_rate)
        out = np.zeros(len(x), dtype=np.float32)
        out[: min(len(x), y.size)] = y[: len(x)]
        return np.clip(out, -1.0, 1.0)


class LineChannel:
    """One signal streaming through a :class:`LineModel`, with a small fixed delay.

    Each :meth:`process` call returns exactly as many samples as it was given:
    the line's output delayed by :attr:`latency` samples (the two filters' delay,
    about 7 ms for an 8 kHz line). :meth:`flush` returns the last ``latency``
    samples. Dropping the first ``latency`` samples of everything returned gives
    what :meth:`LineModel.apply` gives for the whole signal.

    Args:
        model: The line.
        sample_rate: Sample rate of the signal in Hz, a whole multiple of the
            line rate (resample first otherwise).
    """

    def __init__(self, model: LineModel, sample_rate: int) -> None:
        self.model = model
        self.sample_rate = int(sample_rate)
        line_rate = int(model.sample_rate)
        if self.sample_rate <= 0 or self.sample_rate % line_rate:
            raise ValueError(
                f"LineChannel needs a multiple of the {line_rate} Hz line rate, "
                f"got {sample_rate!r} Hz; resample first or use LineModel.apply"
            )
        factor = self.sample_rate // line_rate
        self._down: Decimator | None = None
        self._up: Interpolator | None = None
        self.latency = 0
        up_gain = 1.0
        if factor > 1:
            taps = lowpass_fir(self.sample_rate, 0.85 * line_rate / 2, line_rate / 2)
            self._down = Decimator(taps, factor)
            self._up = Interpolator(taps, factor)
            self.latency = len(taps) - 1
            # White noise at the line rate loses the power the anti-imaging filter cuts.
            up_gain = float(np.sqrt(factor * np.sum(np.square(taps, dtype=np.float64))))
        self._rng = np.random.default_rng(model.seed)
        self._noise_rms = 0.0
        if model.noise_db is not None:
            self._noise_rms = 10.0 ** (model.noise_db / 20.0) / up_gain
        self._pending = np.zeros(0, dtype=np.float32)

    def process(self, chunk: np.ndarray) -> np.ndarray:
        """Passes the next chunk of the signal through the line.

        Args:
            chunk: The next mono samples in [-1, 1].

        Returns:
            ``len(chunk)`` float32 output samples in [-1, 1].
        """
        x = np.asarray(chunk)
        if x.ndim != 1:
            raise ValueError(f"expected mono (1-D) samples, got shape {x.shape}")
        if x.dtype == np.int16:
            x = from_int16(x)
        x = x.astype(np.float32, copy=False)
        low = self._down.process(x) if self._down is not None else x
        low = self._line(low)
        high = self._up.process(low) if self._up is not None else low
        if self._pending.size:
            high = np.concatenate([self._pending, high])
        out, self._pending = high[: x.size], high[x.size :]
        return np.clip(out, -1.0, 1.0)

    def flush(self) -> np.ndarray:
        """Ends the signal and returns the last :attr:`latency` output samples."""
        return self.process(np.zeros(self.latency, dtype=np.float32))

    def _line(self, x: np.ndarray) -> np.ndarray:
        """Noise and codec, at the line rate."""
        if self._noise_rms and x.size:
            noise = self._rng.standard_normal(x.size, dtype=np.float32)
            x = x + np.float32(self._noise_rms) * noise
        if self.model.codec != "none":
            index = to_int16(x).astype(np.int32)
            index += 32768
            x = _ROUND_TRIP[self.model.codec][index]
        return x
