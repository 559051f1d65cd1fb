"""Audio arrays for the call simulator: loading, resampling, int16 conversion, framing.

Every function here works on mono ``float32`` arrays with samples in [-1, 1] at an
explicit sample rate. General resampling uses libsoxr (the ``soxr`` package) at its
"high quality" setting: a linear-phase anti-aliasing filter whose passband is flat
to ~92% of the lower Nyquist frequency and whose stopband is below -100 dB, with
the filter delay compensated so that output sample ``i`` lines up with input time
``i / dst_rate``. soxr's streaming mode holds back a varying 50-300 ms, so for
streaming with a low, fixed latency there are small causal FIR stages instead
(:class:`Decimator`, :class:`Interpolator`) for integer rate factors.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

__all__ = [
    "AudioFileError",
    "Decimator",
    "Interpolator",
    "frames",
    "from_int16",
    "load_audio",
    "lowpass_fir",
    "resample",
    "to_int16",
]

_QUALITY = "HQ"
_INT16_SCALE = 32768.0


class AudioFileError(Exception):
    """An audio file named by the user cannot be used.

    Attributes:
        path: The file that failed.
        reason: What is wrong with it, in a few words.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = " ".join(str(reason).split())
        super().__init__(f"{self.path}: {self.reason}")


def _check_rate(name: str, rate: int) -> int:
    if int(rate) != rate or rate <= 0:
        raise ValueError(f"{name} must be a positive whole number of Hz, got {rate!r}")
    return int(rate)


def _mono_float32(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"expected a mono (1-D) signal, got shape {a.shape}")
    if a.dtype == np.int16:
        return from_int16(a)
    return a.astype(np.float32, copy=False)


def resample(x: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Converts a mono signal from one sample rate to another, band-limited.

    Args:
        x: Mono samples (float, or int16 which is scaled to [-1, 1)).
        src_rate: Sample rate of ``x`` in Hz.
        dst_rate: Wanted sample rate in Hz.

    Returns:
        A new float32 array of ``round(len(x) * dst_rate / src_rate)`` samples.
        Content above the lower of the two Nyquist frequencies is removed (not
        folded back), so downsampling does not alias.
    """
    src = _check_rate("src_rate", src_rate)
    dst = _check_rate("dst_rate", dst_rate)
    a = _mono_float32(x)
    if src == dst:
        return a.copy()
    if a.size == 0:
        return np.zeros(0, dtype=np.float32)
    return soxr.resample(a, src, dst, quality=_QUALITY).astype(np.float32, copy=False)


def to_int16(x: np.ndarray) -> np.ndarray:
    """Converts float samples in [-1, 1] to int16 (scale 32768, rounded, clipped)."""
    a = np.rint(np.asarray(x, dtype=np.float32) * _INT16_SCALE)
    return np.clip(a, -32768, 32767).astype(np.int16)


def from_int16(x: np.ndarray) -> np.ndarray:
    """Converts int16 samples to float32 in [-1, 1) (divides by 32768)."""
    return (np.asarray(x, dtype=np.int16).astype(np.float32)) / np.float32(_INT16_SCALE)


def load_audio(path: str | Path, sample_rate: int) -> np.ndarray:
    """Reads an audio file as mono float32 at the given sample rate.

    Any format libsndfile reads (WAV, FLAC, OGG, ...) at any rate is accepted;
    multi-channel files are downmixed by averaging the channels.

    Args:
        path: The file to read.
        sample_rate: The rate to resample to, in Hz.

    Returns:
        The samples, float32 in [-1, 1].

    Raises:
        AudioFileError: The file is missing, unreadable or holds no samples.
    """
    rate = _check_rate("sample_rate", sample_rate)
    p = Path(path)
    if not p.is_file():
        raise AudioFileError(p, "no such file" if not p.exists() else "not a regular file")
    try:
        data, file_rate = sf.read(p, dtype="float32", always_2d=True)
    except sf.LibsndfileError as e:
        raise AudioFileError(p, f"not a readable audio file ({e.error_string})") from e
    except (sf.SoundFileError, RuntimeError, OSError, ValueError) as e:
        raise AudioFileError(p, f"not a readable audio file ({e})") from e
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise AudioFileError(p, "contains no audio samples")
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.clip(resample(mono, int(file_rate), rate), -1.0, 1.0)


def frames(x: np.ndarray, sample_rate: int, frame_ms: int = 20) -> Iterator[np.ndarray]:
    """Splits a signal into consecutive fixed-size frames.

    Args:
        x: Mono samples.
        sample_rate: Sample rate of ``x`` in Hz.
        frame_ms: Frame length in milliseconds; ``sample_rate * frame_ms`` must be a
            multiple of 1000 so every frame has the same whole number of samples.

    Yields:
        Float32 arrays of exactly ``sample_rate * frame_ms // 1000`` samples; the
        last one is zero-padded. An empty signal yields nothing.
    """
    rate = _check_rate("sample_rate", sample_rate)
    if frame_ms <= 0 or (rate * frame_ms) % 1000:
        raise ValueError(f"frame_ms={frame_ms!r} is not a whole number of samples at {rate} Hz")
    size = rate * frame_ms // 1000
    a = _mono_float32(x)
    n_frames = -(-a.size // size)
    padded = np.zeros(n_frames * size, dtype=np.float32)
    padded[: a.size] = a
    for i in range(n_frames):
        yield padded[i * size : (i + 1) * size]


def lowpass_fir(
    sample_rate: int, pass_hz: float, stop_hz: float, attenuation_db: float = 70.0
) -> np.ndarray:
    """Designs a linear-phase low-pass FIR filter (Kaiser-windowed sinc).

    Args:
        sample_rate: Rate the filter runs at, in Hz.
        pass_hz: End of the passband (ripple about the stopband's level: 0.003 dB
            for 70 dB).
        stop_hz: Start of the stopband.
        attenuation_db: Stopband attenuation in dB.

    Returns:
        Float32 taps, an odd number of them (delay ``(len - 1) / 2`` samples), with
        unit gain at 0 Hz.
    """
    if not 0 < pass_hz < stop_hz <= sample_rate / 2:
        raise ValueError(
            f"need 0 < pass_hz < stop_hz <= {sample_rate / 2}, got {pass_hz}, {stop_hz}"
        )
    width = 2 * np.pi * (stop_hz - pass_hz) / sample_rate
    n = int(np.ceil((attenuation_db - 7.95) / (2.285 * width))) + 1
    n += 1 - n % 2
    a = attenuation_db
    if a > 50:
        beta = 0.1102 * (a - 8.7)
    elif a > 21:
        beta = 0.5842 * (a - 21) ** 0.4 + 0.07886 * (a - 21)
    else:
        beta = 0.0
    cutoff = (pass_hz + stop_hz) / sample_rate  # mid-transition, as a fraction of Nyquist
    t = np.arange(n) - (n - 1) / 2
    h = cutoff * np.sinc(cutoff * t) * np.kaiser(n, beta)
    return (h / h.sum()).astype(np.float32)


_FFT_MIN_OUTPUTS = 8192
_FFT_SAMPLES_PER_PASS = 65536  # keeps each pass's FFT working set in the CPU cache


def _convolve_valid(a: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``np.convolve(a, h, "valid")`` in float32, by FFT overlap-save for long inputs.

    The two methods agree to float32 rounding (~1e-6), which is all that
    separates streamed small chunks from a whole signal filtered at once.
    """
    k = h.size
    n_out = a.size - k + 1
    if n_out < _FFT_MIN_OUTPUTS:
        return np.convolve(a, h, mode="valid")
    size = max(1024, 1 << int(np.ceil(np.log2(8 * k))))
    step = size - k + 1
    n_blocks = -(-n_out // step)
    padded = np.zeros(n_blocks * step + k - 1, dtype=np.float32)
    padded[: a.size] = a
    windows = np.lib.stride_tricks.sliding_window_view(padded, size)[::step]
    spectrum = np.fft.rfft(h, size)
    out = np.empty(n_blocks * step, dtype=np.float32)
    per_pass = max(1, _FFT_SAMPLES_PER_PASS // size)
    for b in range(0, n_blocks, per_pass):
        part = np.fft.rfft(windows[b : b + per_pass], axis=1) * spectrum
        done = np.fft.irfft(part, size, axis=1)[:, k - 1 :]
        out[b * step : b * step + done.size] = done.reshape(-1)
    return out[:n_out]


class Decimator:
    """Streaming causal FIR low-pass filter and downsampler by an integer factor.

    Output ``j`` is the filtered input at sample ``j * factor``: it is produced as
    soon as that input sample arrives, and lags the signal by the filter's delay
    ``(len(taps) - 1) / 2`` input samples.

    Args:
        taps: Low-pass FIR taps at the input rate (see :func:`lowpass_fir`).
        factor: Input rate divided by output rate.
    """

    def __init__(self, taps: np.ndarray, factor: int) -> None:
        self.factor = int(factor)
        per_phase = -(-len(taps) // self.factor)
        h = np.zeros(per_phase * self.factor, dtype=np.float32)
        h[: len(taps)] = taps
        self._phases = [h[m :: self.factor].copy() for m in range(self.factor)]
        self._history = np.zeros(h.size, dtype=np.float32)
        self._count = 0

    def process(self, x: np.ndarray) -> np.ndarray:
        """Filters and downsamples the next input samples (float32)."""
        m_factor, k = self.factor, len(self._phases[0])
        data = np.concatenate([self._history, _mono_float32(x)])
        start_abs = self._count - self._history.size
        j0 = -(-self._count // m_factor)
        self._count += data.size - self._history.size
        j1 = -(-self._count // m_factor)
        y = np.zeros(max(j1 - j0, 0), dtype=np.float32)
        if y.size:
            # Phase m convolves the inputs at j * factor - m with taps m, m + factor, ...
            for m, h_m in enumerate(self._phases):
                lo = (j0 - k + 1) * m_factor - m - start_abs
                hi = (j1 - 1) * m_factor - m - start_abs + 1
                y += _convolve_valid(data[lo:hi:m_factor], h_m)
        self._history = data[data.size - self._history.size :].copy()
        return y


class Interpolator:
    """Streaming causal FIR upsampler by an integer factor (anti-imaging filter).

    Each input sample yields ``factor`` output samples; the output lags the
    signal by the filter's delay ``(len(taps) - 1) / 2`` output samples.

    Args:
        taps: Low-pass FIR taps at the output rate, unit DC gain.
        factor: Output rate divided by input rate.
    """

    def __init__(self, taps: np.ndarray, factor: int) -> None:
        self.factor = int(factor)
        per_phase = -(-len(taps) // self.factor)
        h = np.zeros(per_phase * self.factor, dtype=np.float32)
        h[: len(taps)] = np.asarray(taps, dtype=np.float32) * self.factor
        self._phases = [h[p :: self.factor].copy() for p in range(self.factor)]
        self._history = np.zeros(per_phase - 1, dtype=np.float32)

    def process(self, x: np.ndarray) -> np.ndarray:
        """Upsamples the next input samples; returns ``factor * len(x)`` samples."""
        a = _mono_float32(x)
        data = np.concatenate([self._history, a])
        out = np.empty((a.size, self.factor), dtype=np.float32)
        if a.size:
            for p, h_p in enumerate(self._phases):
                out[:, p] = _convolve_valid(data, h_p)
        if self._history.size:
            self._history = data[data.size - self._history.size :].copy()
        return out.reshape(-1)
