"""Streaming Whisper STT: events, interims, speculative finals and closing.

The VAD is the real silero (cheap); Whisper is a scripted ``transcribe`` that hears
one word per 0.25 s of audio, so these tests say nothing about accuracy (the
integration tests do). Everything runs on the virtual clock: frames are paced at
20 ms of loop time, and time stands still while a decode runs in the executor.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import stt

from agent.core import clock
from agent.models import build_stt, build_vad
from agent.models.whisper_stream import StablePrefix, StreamingWhisperSTT, agreed_words
from agent.models.whisper_stt import WHISPER_SAMPLE_RATE, Decoded, WhisperOptions, WhisperSTT
from agent.telephony.audio import load_audio, to_int16

SAM = Path(__file__).resolve().parents[1] / "calls" / "audio" / "sam-intro-8k.wav"
RATE = 16000
S = stt.SpeechEventType
SECONDS_PER_WORD = 0.25
WORDS_PER_SEGMENT = 4


class ScriptedWhisper(StreamingWhisperSTT):
    """A streaming Whisper whose decode hears ``w1 w2 ...``: one word per 0.25 s."""

    def __init__(self, *, gate: threading.Event | None = None, **opts: object) -> None:
        super().__init__(
            vad=build_vad("silero", min_silence_duration=0.3), options=WhisperOptions(**opts)
        )  # type: ignore[arg-type]
        self.gate = gate
        #: (seconds of audio, prompt, timestamps) per decode, in order
        self.decodes: list[tuple[float, str | None, bool]] = []
        #: called in the decode thread as each decode starts
        self.on_start: Callable[[], object] = lambda: None
        self.running = self.most_at_once = 0
        self._count = threading.Lock()

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        language: str | None = None,
        prompt: str | None = None,
        timestamps: bool = False,
    ) -> Decoded:
        with self._count:
            self.decodes.append((len(audio) / WHISPER_SAMPLE_RATE, prompt, timestamps))
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.on_start()
        try:
            if self.gate is not None:
                assert self.gate.wait(10)
            time.sleep(0.002)  # a decode takes time: let another one overlap, if it could
            return self._hear(audio, prompt, timestamps)
        finally:
            with self._count:
                self.running -= 1

    def _hear(self, audio: np.ndarray, prompt: str | None, timestamps: bool) -> Decoded:
        # words are numbered through the utterance: the prompt holds the ones before
        before = len(prompt.split()) if prompt else 0
        n = int(len(audio) / WHISPER_SAMPLE_RATE / SECONDS_PER_WORD)
        words = [f"w{before + i + 1}" for i in range(n)]
        if not timestamps:
            return Decoded(" ".join(words), 0.9, ((0.0, 30.0, " ".join(words)),))
        # with timestamps, a segment per WORDS_PER_SEGMENT words
        k = WORDS_PER_SEGMENT
        segments = tuple(
            (i * SECONDS_PER_WORD, (i + len(part)) * SECONDS_PER_WORD, " ".join(part))
            for i in range(0, n, k)
            for part in [words[i : i + k]]
        )
        return Decoded(" ".join(words), 0.9, segments)


@dataclass
class Heard:
    events: list[tuple[float, stt.SpeechEvent]] = field(default_factory=list)

    def kinds(self) -> list[stt.SpeechEventType]:
        return [ev.type for _, ev in self.events if ev.type != S.RECOGNITION_USAGE]

    def of(self, kind: stt.SpeechEventType) -> list[stt.SpeechEvent]:
        return [ev for _, ev in self.events if ev.type == kind]

    def at(self, kind: stt.SpeechEventType) -> list[float]:
        return [t for t, ev in self.events if ev.type == kind]


def _speech() -> np.ndarray:
    """2.4 s of "Yes, this is Sam. What's this about?", without the file's silent ends.

    It has pauses of up to 0.28 s inside: shorter than the VAD's 0.3 s.
    """
    return to_int16(load_audio(SAM, RATE))[int(0.14 * RATE) : int(2.5 * RATE)]


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.int16)


async def _feed(model: stt.STT, audio: np.ndarray) -> Heard:
    """Push ``audio`` in 20 ms frames on the loop clock; collect what the stream says."""
    loop = asyncio.get_running_loop()
    heard = Heard()
    async with model.stream() as stream:

        async def push() -> None:
            step = RATE // 50
            for i in range(0, len(audio), step):
                chunk = audio[i : i + step]
                stream.push_frame(rtc.AudioFrame(chunk.tobytes(), RATE, 1, len(chunk)))
                await asyncio.sleep(0.02)
            stream.end_input()

        pushing = asyncio.create_task(push())
        async for ev in stream:
            heard.events.append((loop.time(), ev))
        await pushing
    return heard


def test_one_utterance_gives_interims_then_end_and_final_under_one_request_id() -> None:
    model = ScriptedWhisper()
    audio = np.concatenate([_silence(0.5), _speech(), _silence(1.0)])
    heard = clock.run(_feed(model, audio))

    kinds = heard.kinds()
    assert kinds[0] == S.START_OF_SPEECH
    assert kinds[-2:] == [S.END_OF_SPEECH, S.FINAL_TRANSCRIPT]
    assert set(kinds[1:-2]) == {S.INTERIM_TRANSCRIPT} and len(kinds) >= 5
    assert len({ev.request_id for _, ev in heard.events}) == 1
    assert heard.events[0][1].request_id.startswith("stt_")

    interims = [ev.alternatives[0].text for ev in heard.of(S.INTERIM_TRANSCRIPT)]
    assert [len(t.split()) for t in interims] == sorted(len(t.split()) for t in interims)
    final = heard.of(S.FINAL_TRANSCRIPT)[0]
    data = final.alternatives[0]
    assert data.text.startswith(interims[-1])
    assert (data.language, data.start_time, data.confidence) == ("en", 0.0, 0.9)
    # the batch STT's fields: end_time is the VAD segment's length
    assert 2.5 < data.end_time < 4.0
    assert final.speech_end_time == heard.of(S.END_OF_SPEECH)[0].speech_end_time
    assert final.speech_end_time is not None


def test_the_final_is_the_decode_started_when_the_silence_began() -> None:
    model = ScriptedWhisper()
    audio = np.concatenate([_silence(0.5), _speech(), _silence(1.0)])
    heard = clock.run(_feed(model, audio))

    # no decode after END_OF_SPEECH: the last one started at the silence, it is the final
    last_seconds = model.decodes[-1][0]
    end_of_speech = heard.of(S.END_OF_SPEECH)[0]
    # ready at END_OF_SPEECH; sent one VAD window later, once the session's VAD has it too
    (final_at,), (ended_at,) = heard.at(S.FINAL_TRANSCRIPT), heard.at(S.END_OF_SPEECH)
    assert final_at - ended_at == pytest.approx(0.032, abs=1e-6)
    speech = len(_speech()) / RATE
    assert speech < last_seconds < speech + 0.5 + 0.3  # the VAD's 0.5 s padding, no tail
    assert end_of_speech.request_id == heard.of(S.FINAL_TRANSCRIPT)[0].request_id


def test_a_pause_longer_than_the_vad_silence_gives_two_finals() -> None:
    model = ScriptedWhisper()
    audio = np.concatenate([_silence(0.5), _speech(), _silence(1.0), _speech(), _silence(1.0)])
    heard = clock.run(_feed(model, audio))

    kinds = [k for k in heard.kinds() if k != S.INTERIM_TRANSCRIPT]
    assert kinds == [S.START_OF_SPEECH, S.END_OF_SPEECH, S.FINAL_TRANSCRIPT] * 2
    first, second = heard.of(S.FINAL_TRANSCRIPT)
    assert first.request_id != second.request_id
    # every interim of the second utterance comes after the first final
    second_interims = [
        ev for ev in heard.of(S.INTERIM_TRANSCRIPT) if ev.request_id == second.request_id
    ]
    assert second_interims
    assert (
        min(t for t, ev in heard.events if ev.request_id == second.request_id)
        >= heard.at(S.FINAL_TRANSCRIPT)[0]
    )


def test_speech_after_a_short_pause_drops_the_speculative_decode() -> None:
    model = ScriptedWhisper()
    speech = _speech()
    audio = np.concatenate([_silence(0.5), speech, _silence(0.15), speech, _silence(1.0)])
    heard = clock.run(_feed(model, audio))

    finals = heard.of(S.FINAL_TRANSCRIPT)
    assert len(finals) == 1
    # the final covers both halves, not just the speech before the pause
    words = len(finals[0].alternatives[0].text.split())
    assert words >= int(2 * len(speech) / RATE / SECONDS_PER_WORD)


def test_decodes_never_overlap_and_interims_follow_the_cadence() -> None:
    audio = np.concatenate([_silence(0.5), _speech(), _speech(), _silence(1.0)])
    often, rarely = ScriptedWhisper(interim_every=0.5), ScriptedWhisper(interim_every=100.0)
    heard = clock.run(_feed(often, audio))
    heard_rarely = clock.run(_feed(rarely, audio))

    assert often.most_at_once == 1
    assert len(often.decodes) > len(rarely.decodes)
    assert len(heard.of(S.INTERIM_TRANSCRIPT)) > len(heard_rarely.of(S.INTERIM_TRANSCRIPT))
    # without the cadence, the decodes started at the pauses still show interims
    assert heard_rarely.of(S.INTERIM_TRANSCRIPT)
    covered = [ev.alternatives[0].end_time for ev in heard.of(S.INTERIM_TRANSCRIPT)]
    assert covered == sorted(covered)


def test_a_long_utterance_is_cut_and_its_text_becomes_the_prompt() -> None:
    model = ScriptedWhisper(trim_after=2.0)
    speech = np.concatenate([_speech(), _speech(), _speech()])
    audio = np.concatenate([_silence(0.5), speech, _silence(1.0)])
    heard = clock.run(_feed(model, audio))

    prompted = [(seconds, prompt) for seconds, prompt, _ in model.decodes if prompt]
    assert prompted, model.decodes
    # once cut, a decode covers the tail only: the final one too
    seconds, prompt = prompted[-1]
    assert model.decodes[-1][1] == prompt
    assert seconds < len(speech) / RATE - 2.0
    # and the text runs on without a gap or a repeat
    final = heard.of(S.FINAL_TRANSCRIPT)[0].alternatives[0].text.split()
    assert final == [f"w{i + 1}" for i in range(len(final))]
    assert len(final) >= int(len(speech) / RATE / SECONDS_PER_WORD)
    for interim in heard.of(S.INTERIM_TRANSCRIPT):
        words = interim.alternatives[0].text.split()
        assert words == [f"w{i + 1}" for i in range(len(words))]


def test_closing_mid_decode_waits_for_it_and_leaves_nothing_running() -> None:
    gate = threading.Event()
    model = ScriptedWhisper(gate=gate)
    audio = np.concatenate([_silence(0.5), _speech(), _silence(1.0)])

    async def main() -> None:
        loop = asyncio.get_running_loop()
        decoding = asyncio.Event()
        model.on_start = lambda: loop.call_soon_threadsafe(decoding.set)
        stream = model.stream()

        async def push() -> None:
            step = RATE // 50
            for i in range(0, len(audio), step):
                chunk = audio[i : i + step]
                stream.push_frame(rtc.AudioFrame(chunk.tobytes(), RATE, 1, len(chunk)))
                await asyncio.sleep(0.02)

        pushing = asyncio.create_task(push())
        await decoding.wait()  # the first decode is blocked in its thread
        pushing.cancel()
        threading.Timer(0.2, gate.set).start()
        await stream.aclose()
        assert gate.is_set()  # aclose returned after the decode thread let go
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == [], [t.get_name() for t in leftover]

    clock.run(main())
    assert len(model.decodes) == 1 and model.running == 0


def test_recognize_still_transcribes_a_whole_buffer() -> None:
    model = ScriptedWhisper()
    speech = _speech()

    async def main() -> stt.SpeechEvent:
        return await model.recognize(rtc.AudioFrame(speech.tobytes(), RATE, 1, len(speech)))

    event = clock.run(main())
    assert event.type == S.FINAL_TRANSCRIPT
    assert len(event.alternatives[0].text.split()) == int(len(speech) / RATE / SECONDS_PER_WORD)


def test_registry_builds_the_streaming_stt_with_a_vad_and_the_batch_one_without() -> None:
    vad = build_vad("silero", min_silence_duration=0.3)
    streaming = build_stt("local/whisper-tiny.en", vad=vad)
    assert isinstance(streaming, StreamingWhisperSTT)
    assert streaming.capabilities.streaming and streaming.capabilities.interim_results
    for batch in (
        build_stt("local/whisper-tiny.en", vad=vad, streaming=False),
        build_stt("local/whisper-tiny.en"),
    ):
        assert type(batch) is WhisperSTT and not batch.capabilities.streaming


# -- the stable prefix, pure ----------------------------------------------------------


def _decoded(text: str, *segments: tuple[float, float, str]) -> Decoded:
    return Decoded(text, 0.9, segments or ((0.0, 1.0, text),))


def test_agreement_ignores_case_and_punctuation() -> None:
    assert agreed_words("Hello, this is".split(), "hello this was".split()) == 2
    assert agreed_words([], "a b".split()) == 0


def test_words_two_hypotheses_agree_on_are_committed_and_kept() -> None:
    prefix = StablePrefix()
    assert prefix.hypothesis(_decoded("Oh the fermi")) == "Oh the fermi"
    assert prefix.committed == ""
    assert prefix.hypothesis(_decoded("Oh, the furniture delivery")) == "Oh, the furniture delivery"
    assert prefix.committed == "Oh, the"
    assert prefix.hypothesis(_decoded("Oh, the furniture delivery is")) == (
        "Oh, the furniture delivery is"
    )
    assert prefix.committed == "Oh, the furniture delivery"
    # a later hypothesis that disagrees inside the committed words does not change them
    assert prefix.hypothesis(_decoded("All the furniture delivery is it")) == (
        "Oh, the furniture delivery is it"
    )
    assert prefix.committed == "Oh, the furniture delivery"


def test_trim_cuts_committed_segments_and_moves_their_words_to_the_prompt() -> None:
    prefix = StablePrefix()
    first = _decoded(
        "One two three. Four five", (0.0, 2.0, "One two three."), (2.0, 3.5, "Four five")
    )
    second = _decoded(
        "One two three. Four five six",
        (0.0, 2.0, "One two three."),
        (2.0, 3.5, "Four five"),
        (3.5, 9.0, "six"),
    )
    prefix.hypothesis(first)
    assert prefix.trim(first, 4 * WHISPER_SAMPLE_RATE, trim_after=8.0) == 0  # short: kept
    prefix.hypothesis(second)
    cut = prefix.trim(second, 9 * WHISPER_SAMPLE_RATE, trim_after=8.0)
    # the last segment is still being spoken; both committed segments before it are cut
    assert cut == int(3.5 * WHISPER_SAMPLE_RATE) and prefix.cut == cut
    assert prefix.prompt == "One two three. Four five"
    assert prefix.hypothesis(_decoded("six seven")) == "One two three. Four five six seven"
    assert StablePrefix.final_text(tuple(prefix.done), _decoded("six seven eight")) == (
        "One two three. Four five six seven eight"
    )


def test_trim_keeps_segments_that_are_not_committed_yet() -> None:
    prefix = StablePrefix()
    prefix.hypothesis(_decoded("One two"))
    decoded = _decoded("One two three four", (0.0, 2.0, "One two three"), (2.0, 9.0, "four"))
    prefix.hypothesis(decoded)  # commits "One two" only
    assert prefix.trim(decoded, 9 * WHISPER_SAMPLE_RATE, trim_after=8.0) == 0
    assert prefix.prompt == ""


@pytest.mark.parametrize("text", ["", "   "])
def test_nothing_heard_is_an_empty_text(text: str) -> None:
    assert StablePrefix().hypothesis(_decoded(text)) == ""
