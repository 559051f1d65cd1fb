"""Streaming local speech-to-text: Whisper transcribes while the callee speaks.

livekit pairs the batch ``WhisperSTT`` with the session's VAD through
``stt.StreamAdapter``, which transcribes an utterance only after the VAD's
END_OF_SPEECH, itself ``turn.vad_min_silence`` after the speech ended: every reply
waits for that decode. :class:`StreamingWhisperSTT` is a streaming livekit STT that
segments speech with its own stream of the same VAD and emits the adapter's events
(START_OF_SPEECH, END_OF_SPEECH, FINAL_TRANSCRIPT, one request id per utterance,
the same ``SpeechData`` fields), plus INTERIM_TRANSCRIPT while the callee speaks:

- Interims: every ``interim_every`` seconds of new speech the utterance so far is
  decoded again; never two decodes of one stream at once, and interims keep Whisper
  busy at most half the time. Words on which two consecutive hypotheses agree are committed
  (:class:`StablePrefix`); when the undecided audio grows past ``trim_after``
  seconds, the committed audio is cut at a Whisper segment boundary and its text
  becomes the prompt, so later decodes, and the final one, cover only the tail.
- Speculative final: the first window of silence after speech starts a decode of the
  utterance so far. If no speech arrives before END_OF_SPEECH, that decode is the
  final transcript, ready at (or soon after) END_OF_SPEECH; if speech resumes, its
  result is only an interim, and the next silence starts another.

Whisper runs in ``loop.run_in_executor`` (the virtual clock stands still meanwhile), on
the model ``load_whisper_model`` shares per process. Closing the stream cancels its
tasks and waits for a decode already running in a thread, so nothing is left running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from livekit import rtc
from livekit.agents import LanguageCode, stt, utils, vad
from livekit.agents.metrics import STTMetrics
from livekit.agents.metrics.base import Metadata
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.utils import is_given

from agent.models.whisper_stt import (
    WHISPER_SAMPLE_RATE,
    Decoded,
    WhisperOptions,
    WhisperSTT,
    audio_to_whisper_input,
    norm_word,
)

__all__ = ["StablePrefix", "StreamingWhisperSTT", "WhisperRecognizeStream"]

logger = logging.getLogger(__name__)

# Whisper errors are not network errors: retrying the stream would replay nothing
_NO_RETRY = APIConnectOptions(max_retry=0, timeout=DEFAULT_API_CONNECT_OPTIONS.timeout)


def agreed_words(first: list[str], second: list[str]) -> int:
    """How many leading words two hypotheses share, ignoring case and punctuation."""
    n = 0
    for a, b in zip(first, second, strict=False):
        if norm_word(a) != norm_word(b):
            break
        n += 1
    return n


class StablePrefix:
    """The text of one growing utterance: committed words, cut audio, prompt.

    Pure bookkeeping, no I/O. Hypotheses are decodes of the utterance's audio from
    ``cut`` (16 kHz samples) to its current end. A word is committed once two
    consecutive hypotheses start with it (local agreement); committed words are shown
    first in every interim, so they never change on screen. Words of audio that was
    cut away are final: they are the prompt of the next decodes.
    """

    def __init__(self) -> None:
        """Start an utterance with nothing heard."""
        #: words of the audio cut away (final)
        self.done: list[str] = []
        #: 16 kHz samples cut from the start of the utterance
        self.cut = 0
        self._stable: list[str] = []  # committed words of the audio after ``cut``
        self._last: list[str] = []  # the previous hypothesis of that audio

    @property
    def prompt(self) -> str:
        """Text of the cut audio, for Whisper's initial prompt."""
        return " ".join(self.done)

    @property
    def committed(self) -> str:
        """Every committed word so far."""
        return " ".join([*self.done, *self._stable])

    def hypothesis(self, decoded: Decoded) -> str:
        """Take a decode of the audio after ``cut``; returns the interim text."""
        words = decoded.text.split()
        agreed = agreed_words(self._last, words)
        if agreed > len(self._stable):
            self._stable = words[:agreed]
        self._last = words
        return " ".join([*self.done, *self._stable, *words[len(self._stable) :]])

    def trim(self, decoded: Decoded, samples: int, trim_after: float) -> int:
        """Cut committed audio at a segment boundary once the rest is long.

        Args:
            decoded: the hypothesis just taken, decoded with timestamps.
            samples: 16 kHz samples that hypothesis covered (after ``cut``).
            trim_after: cut only when ``samples`` is longer than this, in seconds.

        Returns:
            The samples cut now (0 when nothing was cut).
        """
        if samples <= trim_after * WHISPER_SAMPLE_RATE:
            return 0
        words = decoded.text.split()
        covered = agreed_words(self._stable, words)
        count, keep_words, cut_at = 0, 0, 0.0
        # never the last segment: its end is where the speech is still going on
        for _start, end, text in decoded.segments[:-1]:
            count += len(text.split())
            if count > covered:
                break
            keep_words, cut_at = count, end
        cut = min(int(cut_at * WHISPER_SAMPLE_RATE), samples)
        if keep_words == 0 or cut <= 0:
            return 0
        self.done += self._stable[:keep_words]
        self._stable = self._stable[keep_words:]
        self._last = self._last[keep_words:]
        self.cut += cut
        return cut

    @staticmethod
    def final_text(done: tuple[str, ...], decoded: Decoded) -> str:
        """The utterance's text: the cut words, then a decode of the rest."""
        return " ".join([*done, *decoded.text.split()])


class StreamingWhisperSTT(WhisperSTT):
    """faster-whisper as a streaming livekit STT with interim and speculative decodes.

    ``recognize()`` is the batch transcription of :class:`WhisperSTT`.
    """

    streams = True

    def __init__(self, *, vad: vad.VAD, options: WhisperOptions | None = None) -> None:
        """Create the STT; cheap, the weights load on first use or ``prewarm()``.

        Args:
            vad: segments the speech; the session's own VAD (each stream opens its own
                VAD stream, as livekit's ``StreamAdapter`` does).
            options: load and decode options; ``interim_every`` and ``trim_after`` set
                the streaming cadence.
        """
        super().__init__(options=options)
        self._vad = vad

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> WhisperRecognizeStream:
        """Open a stream: push 20 ms frames, read speech events."""
        lang = language if is_given(language) and language else self._opts.language
        return WhisperRecognizeStream(self, vad=self._vad, language=str(lang))


@dataclass
class _Utterance:
    """One VAD segment: its audio as the VAD buffered it, and its text so far."""

    request_id: str
    frames: list[rtc.AudioFrame]
    samples: int
    sample_rate: int
    #: ``samples`` when the latest decode was started
    decoded_upto: int
    prefix: StablePrefix = field(default_factory=StablePrefix)
    #: silences (after speech) so far; the decode started at the latest one, while it lasts
    silences: int = 0
    speculative: asyncio.Task[_Result | None] | None = None
    ended: bool = False


@dataclass(frozen=True)
class _Result:
    decoded: Decoded
    #: what the decode stood on: the cut words (its prompt) and the cut samples
    done: tuple[str, ...]
    cut: int
    #: 16 kHz samples decoded after the cut
    samples: int


class WhisperRecognizeStream(stt.RecognizeStream):
    """One audio stream through the VAD and Whisper; see the module docstring."""

    def __init__(self, owner: StreamingWhisperSTT, *, vad: vad.VAD, language: str) -> None:
        """Open the stream (its tasks start at once; livekit's ``RecognizeStream``)."""
        super().__init__(stt=owner, conn_options=_NO_RETRY)
        self._owner = owner
        self._vad = vad
        self._language = language
        self._lock = asyncio.Lock()  # one decode of this stream at a time
        self._in_flight: set[asyncio.Future[tuple[Decoded, int]]] = set()
        self._utterance: _Utterance | None = None
        self._decodes: set[asyncio.Task[_Result | None]] = set()  # interims and speculative
        # loop time when the last decode ended, and how long it took
        self._idle_since = 0.0
        self._last_cost = 0.0
        self._group: asyncio.TaskGroup | None = None

    async def _run(self) -> None:
        vad_stream = self._vad.stream()
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                group.create_task(self._forward(vad_stream), name="whisper_stream.forward")
                group.create_task(self._follow(vad_stream), name="whisper_stream.follow")
        except ExceptionGroup as failed:
            if len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise
        finally:
            self._group = None
            if self._in_flight:
                # a thread cannot be cancelled: let the running decode finish
                await asyncio.wait(set(self._in_flight))
            await vad_stream.aclose()

    async def _forward(self, vad_stream: vad.VADStream) -> None:
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                vad_stream.flush()
            else:
                vad_stream.push_frame(item)
        vad_stream.end_input()

    async def _follow(self, vad_stream: vad.VADStream) -> None:
        async for ev in vad_stream:
            match ev.type:
                case vad.VADEventType.START_OF_SPEECH:
                    self._start(ev)
                case vad.VADEventType.INFERENCE_DONE:
                    self._progress(ev)
                case vad.VADEventType.END_OF_SPEECH:
                    await self._end(ev)
        self._drop()

    def _start(self, ev: vad.VADEvent) -> None:
        self._drop()
        utterance = self._new_utterance(ev.frames)
        self._utterance = utterance
        self._send(stt.SpeechEventType.START_OF_SPEECH, utterance)

    def _new_utterance(self, frames: list[rtc.AudioFrame]) -> _Utterance:
        samples = sum(f.samples_per_channel for f in frames)
        rate = frames[0].sample_rate if frames else WHISPER_SAMPLE_RATE
        return _Utterance(utils.shortuuid("stt_"), list(frames), samples, rate, samples)

    def _progress(self, ev: vad.VADEvent) -> None:
        utterance = self._utterance
        if utterance is None or utterance.ended:
            return
        # the VAD's speech buffer grows by exactly these frames (silero's INFERENCE_DONE)
        for frame in ev.frames:
            utterance.frames.append(frame)
            utterance.samples += frame.samples_per_channel
        # The raw counters describe the previous window: speech (> deactivation
        # threshold while speaking) resets the silence count and vice versa. ``speaking``
        # stays true until END_OF_SPEECH, so it cannot tell when the silence began.
        if ev.raw_accumulated_speech > 0:
            # speech resumed: the decode started at the silence is not the final one;
            # it still serves as an interim
            utterance.speculative = None
            self._maybe_interim(utterance)
        elif ev.raw_accumulated_silence > 0 and utterance.speculative is None:
            utterance.silences += 1
            utterance.decoded_upto = utterance.samples
            utterance.speculative = self._spawn(
                self._hypothesis(utterance, "speculative"), "whisper_stream.speculative"
            )

    def _maybe_interim(self, utterance: _Utterance) -> None:
        if self._decodes:
            return  # one decode at a time, queued ones included
        # interims keep Whisper busy at most half the time: when decodes are slow (a
        # loaded machine), the next one waits, so the final's decode rarely queues
        # behind an interim and the VAD keeps its share of the CPU
        if asyncio.get_running_loop().time() - self._idle_since < self._last_cost:
            return
        every = self._owner.options.interim_every
        if every <= 0 or utterance.samples - utterance.decoded_upto < every * utterance.sample_rate:
            return
        utterance.decoded_upto = utterance.samples
        self._spawn(self._hypothesis(utterance, "interim"), "whisper_stream.interim")

    def _spawn(
        self, coro: Coroutine[Any, Any, _Result | None], name: str
    ) -> asyncio.Task[_Result | None]:
        assert self._group is not None, "decodes run inside the stream's task group"
        task = self._group.create_task(coro, name=name)
        self._decodes.add(task)
        task.add_done_callback(self._decodes.discard)
        return task

    def _hypothesis(self, utterance: _Utterance, kind: str) -> Coroutine[Any, Any, _Result | None]:
        """Decode the utterance so far and show it as an interim; it may become the final.

        The audio is taken now. The coroutine returns None when the decode was skipped:
        by the time its turn came, a later silence had started another, or (an interim)
        the utterance had ended.
        """
        frames, silence = list(utterance.frames), utterance.silences

        def wanted() -> bool:
            if utterance.silences != silence:
                return False
            return kind == "speculative" or not utterance.ended

        return self._hypothesis_of(utterance, frames, kind, wanted)

    async def _hypothesis_of(
        self,
        utterance: _Utterance,
        frames: list[rtc.AudioFrame],
        kind: str,
        wanted: Callable[[], bool],
    ) -> _Result | None:
        result = await self._decode(utterance, frames, kind, wanted=wanted)
        prefix = utterance.prefix
        if result is None or utterance is not self._utterance or utterance.ended:
            return result
        if result.cut != prefix.cut:
            return result  # audio was cut meanwhile: a hypothesis of other audio
        text = prefix.hypothesis(result.decoded)
        prefix.trim(result.decoded, result.samples, self._owner.options.trim_after)
        if text:
            duration = sum(f.samples_per_channel for f in frames) / utterance.sample_rate
            self._send(
                stt.SpeechEventType.INTERIM_TRANSCRIPT,
                utterance,
                [self._speech(text, result.decoded.confidence, duration)],
            )
        return result

    async def _end(self, ev: vad.VADEvent) -> None:
        # as livekit's StreamAdapter: wall clock, the VAD's silence taken off
        speech_end_time = time.time() - ev.silence_duration - ev.inference_duration
        utterance = self._utterance or self._new_utterance(ev.frames)
        utterance.ended = True  # no interim after this
        self._send(stt.SpeechEventType.END_OF_SPEECH, utterance, speech_end_time=speech_end_time)
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        ended_at = loop.time()
        result = await utterance.speculative if utterance.speculative is not None else None
        if result is None:
            result = await self._decode(utterance, list(ev.frames), "final")
        assert result is not None  # a decode nobody can supersede
        self._utterance = None
        # The session's own VAD stream sees the same end of speech in the same window,
        # in another task. livekit's adapter always sends the final a decode after its
        # END_OF_SPEECH, so the session has handled its own by then (and commits the
        # turn from the final). A final ready at once waits one VAD window, so that the
        # order stays the same and a replay does not hang on which thread won.
        wait = ended_at + self._vad.capabilities.update_interval - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        duration = sum(f.samples_per_channel for f in ev.frames) / utterance.sample_rate
        self._owner.emit(
            "metrics_collected",
            STTMetrics(
                request_id=utterance.request_id,
                timestamp=time.time(),
                duration=time.perf_counter() - started,
                label=self._owner.label,
                audio_duration=duration,
                streamed=True,
                metadata=Metadata(
                    model_name=self._owner.model, model_provider=self._owner.provider
                ),
            ),
        )
        text = StablePrefix.final_text(result.done, result.decoded)
        if text:
            self._send(
                stt.SpeechEventType.FINAL_TRANSCRIPT,
                utterance,
                [self._speech(text, result.decoded.confidence, duration)],
                speech_end_time=speech_end_time,
            )

    def _drop(self) -> None:
        """Forget the open utterance and cancel its decodes (a running thread finishes)."""
        for task in self._decodes:
            task.cancel()
        self._utterance = None

    async def _decode(
        self,
        utterance: _Utterance,
        frames: list[rtc.AudioFrame],
        kind: str,
        *,
        wanted: Callable[[], bool] | None = None,
    ) -> _Result | None:
        """Decode ``frames`` after the utterance's cut; holds the lock until Whisper is done.

        The lock is released by the executor future, not by this coroutine: a cancelled
        caller leaves its decode running in the thread, and the next decode waits for it.
        ``wanted``, asked once the lock is held, can skip a decode that waited in vain.
        """
        await self._lock.acquire()
        try:
            if wanted is not None and not wanted():
                self._lock.release()
                return None
            prefix = utterance.prefix
            done, cut = tuple(prefix.done), prefix.cut
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(None, self._decode_blocking, frames, cut, prefix.prompt)
        except BaseException:
            self._lock.release()
            raise
        self._in_flight.add(fut)
        started = loop.time()
        fut.add_done_callback(lambda done: self._decoded(done, started, kind, utterance))
        decoded, samples = await asyncio.shield(fut)
        return _Result(decoded, done, cut, samples)

    def _decoded(
        self,
        fut: asyncio.Future[tuple[Decoded, int]],
        started: float,
        kind: str,
        utterance: _Utterance,
    ) -> None:
        self._in_flight.discard(fut)
        self._lock.release()
        # loop time: on the virtual clock a decode takes none, and replays stay exact
        self._idle_since = fut.get_loop().time()
        self._last_cost = self._idle_since - started
        if not fut.cancelled() and fut.exception() is None:
            logger.debug(
                "whisper decode",
                extra={
                    "kind": kind,
                    "request_id": utterance.request_id,
                    "audio_seconds": round(fut.result()[1] / WHISPER_SAMPLE_RATE, 2),
                    "seconds": round(self._last_cost, 3),
                },
            )

    def _decode_blocking(
        self, frames: list[rtc.AudioFrame], cut: int, prompt: str
    ) -> tuple[Decoded, int]:
        audio = audio_to_whisper_input(frames)[cut:]
        decoded = self._owner.transcribe(
            audio,
            language=self._language,
            prompt=prompt,
            # segment times are only needed where the audio may be cut
            timestamps=len(audio) > self._owner.options.trim_after * WHISPER_SAMPLE_RATE,
        )
        return decoded, len(audio)

    def _speech(self, text: str, confidence: float, duration: float) -> stt.SpeechData:
        # the batch STT's fields: times relative to the utterance
        return stt.SpeechData(
            language=LanguageCode(self._language),
            text=text,
            start_time=0.0,
            end_time=duration,
            confidence=confidence,
        )

    def _send(
        self,
        kind: stt.SpeechEventType,
        utterance: _Utterance,
        alternatives: list[stt.SpeechData] | None = None,
        *,
        speech_end_time: float | None = None,
    ) -> None:
        self._event_ch.send_nowait(
            stt.SpeechEvent(
                type=kind,
                request_id=utterance.request_id,
                alternatives=alternatives or [],
                speech_end_time=speech_end_time,
            )
        )
