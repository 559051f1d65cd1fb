"""A content-addressed cache of synthesised speech for recorded-call replay.

Synthesising a ``say`` text with the offline TTS takes far longer than replaying
it, and suites say the same lines over and over; the audio depends only on the
voice, the sample rate and the exact text, so it is cached on disk under the
SHA-256 of those three, with a small in-memory LRU in front.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from agent.telephony.audio import from_int16

__all__ = ["SpeechCache", "Synth"]

Synth = Callable[[str, int], np.ndarray]
"""Synthesises ``text`` at ``sample_rate`` Hz to mono float32 (or int16) samples."""


class SpeechCache:
    """Synthesised speech, looked up in memory, then on disk, then synthesised.

    Files are ``root/<k[:2]>/<k>.npy`` (float32, mono) where ``k`` is
    :meth:`key`; they are written atomically, so concurrent processes sharing
    ``root`` never read a partial file. A file that cannot be read is treated as
    missing and rewritten. Safe to use from several threads: concurrent requests
    for the same text synthesise it once.

    Args:
        root: Folder of the disk cache; created when first written.
        synth: The synthesiser, called as ``synth(text, sample_rate)``.
        voice_id: Names the voice (and anything else that changes the audio),
            so that different voices never share entries.
        memory_items: How many recent results to keep in memory.
    """

    def __init__(self, root: Path, synth: Synth, voice_id: str, *, memory_items: int = 256) -> None:
        self.root = Path(root)
        self.voice_id = voice_id
        self._synth = synth
        self._memory_items = max(0, int(memory_items))
        self._memory: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}

    def key(self, text: str, sample_rate: int) -> str:
        """Returns the hex SHA-256 that identifies ``text`` in this voice and rate."""
        material = json.dumps([self.voice_id, int(sample_rate), text], ensure_ascii=False)
        return hashlib.sha256(material.encode("utf-8")).hexdigest()

    def path(self, text: str, sample_rate: int) -> Path:
        """Returns the file that holds (or would hold) the audio for ``text``."""
        k = self.key(text, sample_rate)
        return self.root / k[:2] / f"{k}.npy"

    def get(self, text: str, sample_rate: int) -> np.ndarray:
        """Returns the speech for ``text`` at ``sample_rate`` Hz.

        Args:
            text: The exact text to say.
            sample_rate: Sample rate of the audio, in Hz.

        Returns:
            Mono float32 samples. The array is shared with the cache and read-only;
            copy it before changing it.
        """
        k = self.key(text, sample_rate)
        with self._lock:
            hit = self._recall(k)
            if hit is not None:
                return hit
            key_lock = self._key_locks.setdefault(k, threading.Lock())
        with key_lock:
            try:
                with self._lock:
                    hit = self._recall(k)
                if hit is None:
                    path = self.root / k[:2] / f"{k}.npy"
                    hit = self._read(path)
                    if hit is None:
                        hit = self._synthesize(text, sample_rate)
                        self._write(path, hit)
                    hit.flags.writeable = False
                with self._lock:
                    self._remember(k, hit)
            finally:
                with self._lock:
                    self._key_locks.pop(k, None)
        return hit

    __call__ = get

    def _recall(self, k: str) -> np.ndarray | None:
        audio = self._memory.get(k)
        if audio is not None:
            self._memory.move_to_end(k)
        return audio

    def _remember(self, k: str, audio: np.ndarray) -> None:
        if self._memory_items == 0:
            return
        self._memory[k] = audio
        self._memory.move_to_end(k)
        while len(self._memory) > self._memory_items:
            self._memory.popitem(last=False)

    def _synthesize(self, text: str, sample_rate: int) -> np.ndarray:
        audio = np.asarray(self._synth(text, sample_rate))
        if audio.ndim != 1:
            raise ValueError(f"synth returned shape {audio.shape}; expected mono (1-D) samples")
        if audio.dtype == np.int16:
            return from_int16(audio)
        return np.array(audio, dtype=np.float32)

    @staticmethod
    def _read(path: Path) -> np.ndarray | None:
        try:
            audio = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError):
            return None  # Truncated or foreign file: synthesise again and replace it.
        if audio.dtype != np.float32 or audio.ndim != 1:
            return None
        return audio

    @staticmethod
    def _write(path: Path, audio: np.ndarray) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, audio, allow_pickle=False)
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
