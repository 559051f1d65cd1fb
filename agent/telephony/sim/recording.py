"""A two-track recording of a simulated call: callee on the left, agent on the right."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile as sf

from agent.telephony.audio import from_int16, to_int16

__all__ = ["Channel", "StereoRecorder"]

Channel = Literal["callee", "agent"]
_CHANNEL_INDEX: dict[str, int] = {"callee": 0, "agent": 1}


class StereoRecorder:
    """Collects audio of both parties, each placed at its time on the call.

    Samples added where others already are (overlapping adds to one channel)
    are summed; the sum is clipped to [-1, 1] when read or written.

    Args:
        sample_rate: Sample rate of everything added, in Hz.
    """

    def __init__(self, sample_rate: int) -> None:
        if int(sample_rate) != sample_rate or sample_rate <= 0:
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        self.sample_rate = int(sample_rate)
        self._buffer = np.zeros((2, 0), dtype=np.float32)
        self._length = 0

    @property
    def duration(self) -> float:
        """Seconds from the start to the end of the last sample added."""
        return self._length / self.sample_rate

    def add(self, channel: Channel, start_seconds: float, samples: np.ndarray) -> None:
        """Mixes samples into one channel at a time offset.

        Args:
            channel: ``"callee"`` (left) or ``"agent"`` (right).
            start_seconds: Where the first sample goes, in seconds from the
                start of the recording (rounded to the nearest sample). Samples
                that would fall before the start are dropped.
            samples: Mono float samples in [-1, 1], or int16.
        """
        if channel not in _CHANNEL_INDEX:
            raise ValueError(f"channel must be 'callee' or 'agent', got {channel!r}")
        if not np.isfinite(start_seconds):
            raise ValueError(f"start_seconds must be a finite number, got {start_seconds!r}")
        a = np.asarray(samples)
        if a.ndim != 1:
            raise ValueError(f"expected mono (1-D) samples, got shape {a.shape}")
        a = from_int16(a) if a.dtype == np.int16 else a.astype(np.float32, copy=False)
        start = round(start_seconds * self.sample_rate)
        if start < 0:
            a, start = a[-start:], 0
        end = start + a.size
        if a.size == 0:
            return
        self._reserve(end)
        self._buffer[_CHANNEL_INDEX[channel], start:end] += a
        self._length = max(self._length, end)

    def samples(self) -> np.ndarray:
        """Returns the recording so far as float32 of shape (frames, 2), clipped."""
        return np.clip(self._buffer[:, : self._length].T, -1.0, 1.0)

    def write(self, path: str | Path) -> None:
        """Writes the recording as a 16-bit stereo WAV file, atomically.

        The file is written under a temporary name in the same folder and then
        renamed over ``path``, so ``path`` is either the complete new file or
        left as it was; no temporary file remains if writing fails.

        Args:
            path: The WAV file to create or replace; its folder must exist.

        Raises:
            OSError: The folder does not exist or cannot be written.
        """
        target = Path(path)
        pcm = to_int16(self.samples())
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                sf.write(f, pcm, self.sample_rate, format="WAV", subtype="PCM_16")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_name, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise

    def _reserve(self, frames: int) -> None:
        capacity = self._buffer.shape[1]
        if frames <= capacity:
            return
        grown = np.zeros((2, max(frames, 2 * capacity, self.sample_rate)), dtype=np.float32)
        grown[:, : self._length] = self._buffer[:, : self._length]
        self._buffer = grown
