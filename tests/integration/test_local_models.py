"""Real inference through the embedded models: piper, whisper, SmolLM2 and silero."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from livekit import rtc
from livekit.agents import llm, stt, vad

from agent.models import build_llm, build_stt, build_tts, build_vad
from agent.models.llama_llm import LlamaLLM, load_llama_model
from agent.models.piper_tts import resample_pcm, synthesize_pcm
from tests.wer import word_error_rate

pytestmark = pytest.mark.integration

PHRASE = "Hello, this is a test of the phone line."
# piper's prosody noise, fixed so that what whisper hears is the same on every run
SEED = 1


def _frames(pcm: np.ndarray, sample_rate: int, ms: int = 20) -> list[rtc.AudioFrame]:
    step = sample_rate * ms // 1000
    return [
        rtc.AudioFrame(chunk.tobytes(), sample_rate, 1, len(chunk))
        for chunk in (pcm[i : i + step] for i in range(0, len(pcm), step))
    ]


async def test_piper_synthesises_a_sentence_in_small_frames() -> None:
    model = build_tts("local/piper-joe", sample_rate=16000)
    frames = []
    async with model.synthesize(PHRASE) as stream:
        async for ev in stream:
            frames.append(ev.frame)
    seconds = sum(f.duration for f in frames)
    assert 1.5 < seconds < 4.5
    assert {(f.sample_rate, f.num_channels) for f in frames} == {(16000, 1)}
    assert max(f.duration for f in frames) <= 0.1
    pcm = np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames])
    assert np.sqrt(np.mean(pcm.astype(np.float64) ** 2)) > 500


def test_a_seeded_piper_render_is_the_same_every_time() -> None:
    # at the voice's own rate: the resampler to 16 kHz dithers its last bit or two
    rate = 22050

    def render(seed: int | None) -> np.ndarray:
        return synthesize_pcm(PHRASE, rate, seed=seed)

    first, unseeded = render(SEED), render(None)
    assert np.array_equal(first, render(SEED))
    # the seed reaches only the render that asks for it
    assert not np.array_equal(first, render(SEED + 1))
    assert not np.array_equal(unseeded, render(None))


async def test_whisper_transcribes_piper_audio_through_a_phone_band() -> None:
    pcm = await asyncio.get_running_loop().run_in_executor(
        None, lambda: synthesize_pcm(PHRASE, 16000, seed=SEED)
    )
    phone = resample_pcm(resample_pcm(pcm, 16000, 8000), 8000, 16000)
    model = build_stt("local/whisper-tiny.en")
    event = await model.recognize(rtc.AudioFrame(phone.tobytes(), 16000, 1, len(phone)))
    assert event.type == stt.SpeechEventType.FINAL_TRANSCRIPT
    assert word_error_rate(PHRASE, event.alternatives[0].text) <= 0.25, event.alternatives[0].text


async def test_whisper_behind_livekit_stream_adapter_transcribes_a_vad_segment() -> None:
    # what AgentSession does with a non-streaming STT: StreamAdapter(stt, session VAD)
    pcm8k = await asyncio.get_running_loop().run_in_executor(
        None, lambda: synthesize_pcm(PHRASE, 8000, seed=SEED)
    )
    silence = np.zeros(8000, dtype=np.int16)
    audio = np.concatenate([silence // 2, pcm8k, silence, silence])
    adapter = stt.StreamAdapter(stt=build_stt("local/whisper-tiny.en"), vad=build_vad("silero"))
    events: list[stt.SpeechEvent] = []
    async with adapter.stream() as stream:
        for frame in _frames(audio, 8000):
            stream.push_frame(frame)
        stream.end_input()
        async for ev in stream:
            events.append(ev)
    kinds = [ev.type for ev in events]
    assert kinds == [
        stt.SpeechEventType.START_OF_SPEECH,
        stt.SpeechEventType.END_OF_SPEECH,
        stt.SpeechEventType.FINAL_TRANSCRIPT,
    ]
    assert word_error_rate(PHRASE, events[-1].alternatives[0].text) <= 0.25
    await adapter.aclose()


async def test_silero_vads_are_separate_objects_on_one_loaded_model() -> None:
    first, second = build_vad("silero"), build_vad("silero")
    assert first is not second
    assert isinstance(first, vad.VAD)
    assert first._onnx_session is second._onnx_session  # type: ignore[attr-defined]
    assert build_vad("silero", min_silence_duration=0.8)._onnx_session is not (  # type: ignore[attr-defined]
        first._onnx_session  # type: ignore[attr-defined]
    )


def _short_chat() -> llm.ChatContext:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="system", content="You are a polite phone agent. Reply in one sentence.")
    ctx.add_message(role="user", content="Hi, is this the dentist's office?")
    return ctx


@llm.function_tool
async def book_appointment(day: str) -> str:
    """Book a dental appointment.

    Args:
        day: the day of the week.
    """
    return f"booked on {day}"


async def test_smollm2_streams_a_reply_and_ignores_offered_tools() -> None:
    model = build_llm("local/smollm2-135m")
    chunks: list[llm.ChatChunk] = []
    async with model.chat(
        chat_ctx=_short_chat(), tools=[book_appointment], tool_choice="auto"
    ) as stream:
        async for chunk in stream:
            chunks.append(chunk)
    text = "".join(c.delta.content or "" for c in chunks if c.delta)
    assert text.strip()
    assert sum(1 for c in chunks if c.delta and c.delta.content) > 1  # streamed, not one blob
    assert not any(c.delta.tool_calls for c in chunks if c.delta)
    usage = [c.usage for c in chunks if c.usage]
    assert usage and 0 < usage[-1].completion_tokens <= 48
    await model.aclose()


async def test_closing_a_running_smollm2_stream_stops_generation_promptly() -> None:
    model = build_llm("local/smollm2-135m", temperature=0.8)
    assert isinstance(model, LlamaLLM)
    ctx = _short_chat()
    ctx.add_message(role="user", content="Tell me a very long story about teeth.")
    stream = model.chat(chat_ctx=ctx, extra_kwargs={"max_tokens": 1000})
    received = 0
    async for chunk in stream:
        if chunk.delta and chunk.delta.content:
            received += 1
            if received == 3:
                break
    started = time.perf_counter()
    await stream.aclose()
    # aclose returns once the generating thread has let go of the model (at most one
    # more token); the bound is loose because CI machines are shared
    assert time.perf_counter() - started < 1.0
    assert not load_llama_model(model.options).lock.locked()

    # the model is free again: the next reply starts at once
    started = time.perf_counter()
    reply = await model.chat(chat_ctx=_short_chat()).collect()
    assert reply.text
    assert time.perf_counter() - started < 5
    await model.aclose()


async def _usage(model: LlamaLLM, ctx: llm.ChatContext) -> llm.CompletionUsage:
    usage = None
    async with model.chat(chat_ctx=ctx) as stream:
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
    assert usage is not None
    return usage


async def test_a_calls_second_request_reuses_the_evaluated_prompt_prefix() -> None:
    shared = build_llm("local/smollm2-135m")
    assert isinstance(shared, LlamaLLM)
    call_a, call_b = shared.for_call(), shared.for_call()
    ctx_a = _short_chat()
    first = await _usage(call_a, ctx_a)
    assert first.prompt_tokens > 20
    # another call in between has a context of its own: it does not evict call A's
    ctx_b = llm.ChatContext.empty()
    ctx_b.add_message(role="system", content="You are a pirate who answers in rhymes.")
    ctx_b.add_message(role="user", content="Where is the treasure?")
    await _usage(call_b, ctx_b)
    ctx_a.add_message(role="assistant", content="Sure, what day suits you?")
    ctx_a.add_message(role="user", content="Thursday afternoon, please.")
    second = await _usage(call_a, ctx_a)
    assert second.prompt_tokens > first.prompt_tokens
    assert second.prompt_cached_tokens >= first.prompt_tokens - 2
    assert second.prompt_cached_tokens > second.prompt_tokens // 2
    # a call that is over gives its context to the next call
    context_b = load_llama_model(shared.options, call_b)
    assert context_b is not load_llama_model(shared.options, call_a)
    call_b.release()
    call_c = shared.for_call()
    assert load_llama_model(shared.options, call_c) is context_b
    call_a.release()
    call_c.release()


async def test_a_prefilled_call_reuses_its_instructions_on_the_first_request() -> None:
    shared = build_llm("local/smollm2-135m")
    assert isinstance(shared, LlamaLLM)
    call = shared.for_call()
    # instructions no earlier test used: a context another call released may hold those
    instructions = "You are a courteous clinic receptionist. Answer in a single short sentence."
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="system", content=instructions)
    ctx.add_message(role="user", content="Hi, is this the dentist's office?")
    evaluated = await call.prefill(instructions)
    assert evaluated > 10
    # evaluated once: a second prefill finds it all in the context
    assert await call.prefill(instructions) == 0
    first = await _usage(call, ctx)
    # all but the few tokens that open the assistant's turn after a system-only prompt
    assert first.prompt_cached_tokens >= evaluated - 4
    # a call that was not prefilled evaluates them (a recycled context may hold the
    # chat template's first few tokens)
    cold = shared.for_call()
    assert (await _usage(cold, ctx)).prompt_cached_tokens < evaluated // 2
    call.release()
    cold.release()


async def test_every_decode_of_a_context_runs_on_that_contexts_own_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """llama.cpp's OpenMP teams belong to the thread that starts a decode: keep it one."""
    from agent.models import llama_llm

    seen: list[str] = []
    generate = llama_llm.LlamaStream._generate_blocking
    prefill = llama_llm.LlamaLLM._prefill_blocking

    def recording_generate(self: llama_llm.LlamaStream, *args: object) -> llm.CompletionUsage:
        seen.append(threading.current_thread().name)
        return generate(self, *args)  # type: ignore[arg-type]

    def recording_prefill(self: LlamaLLM, messages: list[dict[str, str]]) -> int:
        seen.append(threading.current_thread().name)
        return prefill(self, messages)

    monkeypatch.setattr(llama_llm.LlamaStream, "_generate_blocking", recording_generate)
    monkeypatch.setattr(llama_llm.LlamaLLM, "_prefill_blocking", recording_prefill)
    shared = build_llm("local/smollm2-135m")
    assert isinstance(shared, LlamaLLM)
    call_a, call_b = shared.for_call(), shared.for_call()
    try:
        await call_a.prefill("You answer the phone for a bakery.")
        await _usage(call_a, _short_chat())
        await _usage(call_b, _short_chat())
        await _usage(call_a, _short_chat())
    finally:
        call_a.release()
        call_b.release()
    a_threads = {seen[0], seen[1], seen[3]}
    assert len(a_threads) == 1 and seen[2] not in a_threads
    assert all(name.startswith("llama-") for name in seen)


async def test_generated_tokens_run_on_the_thread_count_their_times_favour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each token's threads come from the model's DecodeThreads, which learns from them."""
    from agent.models import llama_llm
    from agent.models.threads import DecodeThreads

    model = build_llm("local/smollm2-135m")
    assert isinstance(model, LlamaLLM)
    slots = llama_llm._slots(model.options)
    chooser = DecodeThreads(model.options.n_threads, probe_every=2)
    monkeypatch.setattr(slots, "decode", chooser)
    set_to: list[int] = []
    set_threads = llama_llm._set_threads

    def recording(llama: object, threads: int) -> None:
        set_to.append(threads)
        set_threads(llama, threads)  # type: ignore[arg-type]

    monkeypatch.setattr(llama_llm, "_set_threads", recording)
    call = model.for_call()
    try:
        usage = await _usage(call, _short_chat())
    finally:
        call.release()
    assert usage.completion_tokens > 3
    measured = chooser.seconds_per_token()
    assert set(measured) == {1, 2} and all(s > 0 for s in measured.values())
    assert 1 in set_to and set_to[-1] == model.options.n_threads  # restored for the next call


def test_the_simulators_piper_lines_are_the_same_on_every_render(tmp_path: Path) -> None:
    from agent.telephony.sim.voices import piper_cache, piper_line

    first = piper_line(PHRASE, 8000)
    assert first.dtype == np.float32 and 1.5 < len(first) / 8000 < 4.5
    assert np.array_equal(first, piper_line(PHRASE, 8000))
    # a cache in another folder renders it anew, the same
    assert np.array_equal(first, piper_cache(tmp_path).get(PHRASE, 8000))
    assert not np.array_equal(piper_line(PHRASE + " Goodbye.", 8000)[: len(first)], first)
