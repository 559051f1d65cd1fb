"""livekit io objects for the simulated phone line.

- :class:`CalleeAudioInput` is the callee's side of the line as an
  ``io.AudioInput``: fixed-size frames paced by the loop clock, silence (plus the
  line's noise floor) when nothing is playing.
- :class:`AgentAudioOutput` is an ``io.AudioOutput`` that "plays" the agent's
  audio in loop time: a segment finishes when its duration has elapsed, and
  ``clear_buffer`` interrupts it at the current position.
- :class:`TranscriptFeedSTT` is the text-only replay's STT: it ignores audio and
  emits the speech events the simulator feeds it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import stt
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.voice import io

from agent.telephony.audio import from_int16, to_int16

__all__ = ["CalleeAudioInput", "AgentAudioOutput", "TranscriptFeedSTT"]


class CalleeAudioInput(io.AudioInput):
    """Frames of callee audio, paced by the loop clock.

    Args:
        sample_rate: rate of the frames handed to the session.
        frame_ms: frame size.
        noise: optional callable giving the line's noise floor for n samples.
        on_frame: called with (start time, samples) for each frame (the recorder).
    """

    def __init__(
        self,
        *,
        sample_rate: int = 16000,
        frame_ms: int = 20,
        noise: Callable[[int], np.ndarray] | None = None,
        on_frame: Callable[[float, np.ndarray], None] | None = None,
    ) -> None:
        super().__init__(label="simulated-callee")
        self.sample_rate = sample_rate
        self.frame_samples = sample_rate * frame_ms // 1000
        self._pending: deque[np.ndarray] = deque()
        self._pending_samples = 0
        self._noise = noise
        self._on_frame = on_frame
        self._t0: float | None = None
        self._n = 0
        self._closed = False

    def play(self, samples: np.ndarray) -> float:
        """Queue float32 samples after what is already queued; returns seconds until they end."""
        if len(samples):
            self._pending.append(samples.astype(np.float32, copy=False))
            self._pending_samples += len(samples)
        return self._pending_samples / self.sample_rate

    def close(self) -> None:
        self._closed = True

    def _take(self, n: int) -> np.ndarray:
        out = np.zeros(n, dtype=np.float32)
        filled = 0
        while filled < n and self._pending:
            head = self._pending[0]
            k = min(n - filled, len(head))
            out[filled : filled + k] = head[:k]
            filled += k
            if k == len(head):
                self._pending.popleft()
            else:
                self._pending[0] = head[k:]
        self._pending_samples -= filled
        if self._noise is not None:
            out += self._noise(n)
        return out

    async def __anext__(self) -> rtc.AudioFrame:
        if self._closed:
            raise StopAsyncIteration
        loop = asyncio.get_running_loop()
        if self._t0 is None:
            self._t0 = loop.time()
        due = self._t0 + (self._n + 1) * self.frame_samples / self.sample_rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if self._closed:
            raise StopAsyncIteration
        start = self._t0 + self._n * self.frame_samples / self.sample_rate
        self._n += 1
        samples = self._take(self.frame_samples)
        if self._on_frame is not None:
            self._on_frame(start, samples)
        pcm = to_int16(samples)
        return rtc.AudioFrame(
            data=pcm.tobytes(),
            sample_rate=self.sample_rate,
            num_channels=1,
            samples_per_channel=len(pcm),
        )


class AgentAudioOutput(io.AudioOutput):
    """Plays agent audio in loop time and reports playback like a real sink.

    Args:
        sample_rate: the rate the sink wants (None accepts any).
        on_played: called when a segment ends with (start time, float32 samples,
            sample rate) for the audio that was actually heard: an interrupted
            segment is cut at the interruption (the recorder).
    """

    def __init__(
        self,
        *,
        sample_rate: int | None = None,
        on_played: Callable[[float, np.ndarray, int], None] | None = None,
    ) -> None:
        super().__init__(
            label="simulated-line",
            capabilities=io.AudioOutputCapabilities(pause=False),
            sample_rate=sample_rate,
        )
        self._on_played = on_played
        self._seg_start: float | None = None
        self._cursor = 0.0  # loop time at which queued audio ends
        self._pushed = 0.0
        self._chunks: list[tuple[float, np.ndarray, int]] = []
        self._wait: asyncio.Task[None] | None = None
        self._interrupted = False
        self._cut_at: float | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        now = asyncio.get_running_loop().time()
        if self._seg_start is None:
            self._seg_start = now
            self._cursor = now
            self._pushed = 0.0
            self._interrupted = False
            self._chunks = []
            self.on_playback_started(created_at=now)
        # a frame that arrives after the queued audio ran out starts playing now
        self._cursor = max(self._cursor, now)
        if self._on_played is not None:
            samples = from_int16(np.frombuffer(bytes(frame.data), dtype=np.int16))
            if frame.num_channels > 1:
                samples = samples.reshape(-1, frame.num_channels).mean(axis=1)
            self._chunks.append((self._cursor, samples, frame.sample_rate))
        self._cursor += frame.duration
        self._pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        if self._seg_start is None:
            return
        if self._interrupted:
            self._finish(interrupted=True)
            return
        if self._wait is None or self._wait.done():
            self._wait = asyncio.ensure_future(self._wait_playout())

    async def _wait_playout(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self._cursor - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        self._finish(interrupted=False)

    def clear_buffer(self) -> None:
        if self._seg_start is None:
            return
        if self._wait is not None and not self._wait.done():
            self._wait.cancel()
            self._wait = None
            self._finish(interrupted=True)
        else:
            # still capturing: the segment ends, interrupted, at the next flush
            self._interrupted = True
            self._cut_at = asyncio.get_running_loop().time()

    def _finish(self, *, interrupted: bool) -> None:
        if self._seg_start is None:
            return
        now = asyncio.get_running_loop().time()
        cut = self._cut_at if interrupted else None
        end = min(now, cut) if cut is not None else now
        position = min(max(0.0, end - self._seg_start), self._pushed)
        if self._on_played is not None:
            heard_until = self._seg_start + position
            for t, samples, sr in self._chunks:
                if not interrupted:
                    self._on_played(t, samples, sr)
                    continue
                if t >= heard_until:
                    break
                keep = min(len(samples), int(round((heard_until - t) * sr)))
                self._on_played(t, samples[:keep], sr)
        self._chunks = []
        self._seg_start = None
        self._interrupted = False
        self._cut_at = None
        self.on_playback_finished(playback_position=position, interrupted=interrupted)

    async def aclose(self) -> None:
        if self._wait is not None and not self._wait.done():
            self._wait.cancel()
            try:
                await self._wait
            except asyncio.CancelledError:
                pass


class TranscriptFeedSTT(stt.STT):
    """A streaming STT that emits what the simulator feeds it and ignores audio.

    Used by ``--text-only`` replays: the callee's ``say`` texts arrive as speech
    start, final transcript and speech end events at the times their audio would
    have occupied.
    """

    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=True))
        self._streams: list[_FeedStream] = []

    @property
    def model(self) -> str:
        return "transcript-feed"

    @property
    def provider(self) -> str:
        return "simulator"

    async def _recognize_impl(
        self,
        buffer: object,
        *,
        language: object = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> stt.SpeechEvent:
        raise NotImplementedError("the transcript feed only streams")

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> stt.RecognizeStream:
        s = _FeedStream(stt=self, conn_options=conn_options)
        self._streams.append(s)
        return s

    def _emit(self, ev: stt.SpeechEvent) -> None:
        self._streams = [s for s in self._streams if not s._closed_feed]
        for s in self._streams:
            s._events.put_nowait(ev)

    def speech_started(self) -> None:
        self._emit(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))

    def final_transcript(self, text: str) -> None:
        self._emit(
            stt.SpeechEvent(
                type=stt.SpeechEventType.FINAL_TRANSCRIPT,
                alternatives=[stt.SpeechData(language="en", text=text, confidence=1.0)],  # type: ignore[arg-type]
            )
        )

    def interim_transcript(self, text: str) -> None:
        self._emit(
            stt.SpeechEvent(
                type=stt.SpeechEventType.INTERIM_TRANSCRIPT,
                alternatives=[stt.SpeechData(language="en", text=text, confidence=0.5)],  # type: ignore[arg-type]
            )
        )

    def speech_ended(self) -> None:
        self._emit(stt.SpeechEvent(type=stt.SpeechEventType.END_OF_SPEECH))


class _FeedStream(stt.RecognizeStream):
    def __init__(self, *, stt: TranscriptFeedSTT, conn_options: APIConnectOptions) -> None:  # noqa: D107
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._closed_feed = False
        super().__init__(stt=stt, conn_options=conn_options)

    async def _run(self) -> None:
        async def drain_audio() -> None:
            async for _ in self._input_ch:
                pass

        drain = asyncio.ensure_future(drain_audio())
        get: asyncio.Future[Any] | None = None
        try:
            while True:
                get = asyncio.ensure_future(self._events.get())
                done, _ = await asyncio.wait({get, drain}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    return
                self._event_ch.send_nowait(get.result())
        finally:
            self._closed_feed = True
            for fut in (get, drain):
                if fut is not None and not fut.done():
                    fut.cancel()
            await asyncio.gather(drain, *([get] if get else []), return_exceptions=True)
