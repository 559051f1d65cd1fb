"""The streaming Whisper STT with the real tiny.en and silero, on Piper speech.

Runs on the virtual clock: frames are paced at 20 ms of loop time and time stands
still while Whisper decodes, so what is heard does not depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import stt

from agent.core import clock
from agent.models import build_stt, build_vad
from agent.models.piper_tts import synthesize_pcm
from agent.models.whisper_stream import StreamingWhisperSTT
from agent.models.whisper_stt import Decoded, WhisperOptions
from tests.wer import word_error_rate, words

pytestmark = pytest.mark.integration

RATE = 16000
SEED = 1
S = stt.SpeechEventType
FIRST = "Oh, the furniture delivery. Is it still coming on Friday?"
SECOND = "Morning is fine. Thanks, bye."
LONG = (
    "Hi, this is Dana from the clinic. I am calling about your appointment next Tuesday "
    "at ten in the morning. Could you please call us back when you have a moment, the "
    "number is on your card. Thank you and have a nice day."
)


@pytest.fixture(scope="module")
def speech() -> dict[str, np.ndarray]:
    # seeded: piper's prosody noise would otherwise give other audio, and now and then
    # another word from tiny.en, on every run
    return {text: synthesize_pcm(text, RATE, seed=SEED) for text in (FIRST, SECOND, LONG)}


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.int16)


async def _events(model: stt.STT, audio: np.ndarray) -> list[stt.SpeechEvent]:
    events: list[stt.SpeechEvent] = []
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
            events.append(ev)
        await pushing
    return events


def _texts(events: list[stt.SpeechEvent], kind: stt.SpeechEventType) -> list[str]:
    return [ev.alternatives[0].text for ev in events if ev.type == kind]


def test_interims_come_first_and_the_final_is_as_good_as_the_batch_one(
    speech: dict[str, np.ndarray],
) -> None:
    audio = np.concatenate([_silence(0.5), speech[FIRST], _silence(1.0)])
    vad = build_vad("silero", min_silence_duration=0.3)

    async def main() -> tuple[list[stt.SpeechEvent], list[stt.SpeechEvent]]:
        streaming = await _events(build_stt("local/whisper-tiny.en", vad=vad), audio)
        # what the session does with the batch STT
        adapter = stt.StreamAdapter(stt=build_stt("local/whisper-tiny.en"), vad=vad)
        batch = await _events(adapter, audio)
        await adapter.aclose()
        return streaming, batch

    events, batch = clock.run(main())
    kinds = [ev.type for ev in events]
    assert kinds[0] == S.START_OF_SPEECH and kinds[-2:] == [S.END_OF_SPEECH, S.FINAL_TRANSCRIPT]
    interims = _texts(events, S.INTERIM_TRANSCRIPT)
    assert interims and kinds.index(S.INTERIM_TRANSCRIPT) < kinds.index(S.FINAL_TRANSCRIPT)
    assert "furniture" in words(" ".join(interims))
    (final,) = _texts(events, S.FINAL_TRANSCRIPT)
    (batch_final,) = _texts(batch, S.FINAL_TRANSCRIPT)
    assert word_error_rate(FIRST, final) <= max(word_error_rate(FIRST, batch_final), 0.1), (
        final,
        batch_final,
    )


def test_a_pause_gives_two_finals(speech: dict[str, np.ndarray]) -> None:
    audio = np.concatenate(
        [_silence(0.5), speech[FIRST], _silence(1.0), speech[SECOND], _silence(1.0)]
    )
    # interims only at pauses: fewer decodes, the same finals
    model = build_stt(
        "local/whisper-tiny.en",
        vad=build_vad("silero", min_silence_duration=0.3),
        interim_every=0.0,
    )
    events = clock.run(_events(model, audio))
    first, second = _texts(events, S.FINAL_TRANSCRIPT)
    assert word_error_rate(FIRST, first) <= 0.2, first
    assert word_error_rate(SECOND, second) <= 0.2, second


class _Watched(StreamingWhisperSTT):
    """The real model; records each decode's prompt and calls ``on_start`` first."""

    on_start: Callable[[], object] = staticmethod(lambda: None)

    def __init__(self, *, min_silence: float = 0.3, **opts: object) -> None:
        vad = build_vad("silero", min_silence_duration=min_silence)
        super().__init__(vad=vad, options=WhisperOptions(**opts))  # type: ignore[arg-type]
        self.prompts: list[str | None] = []

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        language: str | None = None,
        prompt: str | None = None,
        timestamps: bool = False,
    ) -> Decoded:
        self.on_start()
        self.prompts.append(prompt)
        return super().transcribe(audio, language=language, prompt=prompt, timestamps=timestamps)


def test_a_long_utterance_is_cut_and_still_transcribed_whole(
    speech: dict[str, np.ndarray],
) -> None:
    # Whisper splits its output in segments only past a few seconds: 11 s of speech,
    # cut once past 6 s. Piper's pauses between sentences vary from one synthesis to
    # the next; a 0.8 s silence window keeps them inside one utterance
    said = LONG
    audio = np.concatenate([_silence(0.5), speech[LONG], _silence(1.5)])
    model = _Watched(min_silence=0.8, trim_after=6.0, interim_every=1.0)
    events = clock.run(_events(model, audio))
    (final,) = _texts(events, S.FINAL_TRANSCRIPT)
    assert word_error_rate(said, final) <= 0.2, final
    assert any(model.prompts), "no decode was prompted with the text of cut audio"


def test_closing_mid_decode_leaves_nothing_running(speech: dict[str, np.ndarray]) -> None:
    audio = np.concatenate([_silence(0.5), speech[FIRST], _silence(1.0)])
    model = _Watched()

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
        await decoding.wait()
        pushing.cancel()
        await stream.aclose()
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == [], [t.get_name() for t in leftover]
        # the model is free: a batch decode runs at once
        event = await model.recognize(rtc.AudioFrame(audio.tobytes(), RATE, 1, len(audio)))
        assert "furniture" in words(event.alternatives[0].text)

    clock.run(main())
