"""Model registry: names, errors and cheap models; no weights are loaded here."""

from __future__ import annotations

import pytest
from livekit.agents import llm
from livekit.plugins import openai

from agent.models import (
    ModelConfigError,
    UnknownModelError,
    build_llm,
    build_stt,
    build_tts,
    build_vad,
    known_models,
)
from agent.models.estimate_tts import EstimateTTS, estimated_duration
from agent.models.llama_llm import LlamaLLM, chat_ctx_to_messages, fit_messages
from agent.models.piper_tts import PiperTTS
from agent.models.whisper_stt import WhisperSTT


@pytest.fixture
def no_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_known_models_lists_local_defaults() -> None:
    known = known_models()
    assert known["stt"] == ["local/whisper-tiny.en", "openai/<model>"]
    assert "local/piper-joe" in known["tts"] and "local/estimate" in known["tts"]
    assert known["llm"] == ["local/smollm2-135m", "openai/<model>", "script:<file.yaml>"]
    assert known["vad"] == ["silero"]


@pytest.mark.parametrize(
    ("build", "kind", "spec"),
    [
        (build_stt, "stt", "x/y"),
        (build_stt, "stt", "openai/"),
        (build_tts, "tts", "local/piper"),
        (build_llm, "llm", "local/smollm2"),
        (build_vad, "vad", "webrtc"),
    ],
)
def test_unknown_model_is_a_one_line_error_listing_known_names(
    build: object, kind: str, spec: str
) -> None:
    assert callable(build)
    with pytest.raises(UnknownModelError) as info:
        build(spec)
    message = str(info.value)
    assert "\n" not in message
    assert message == f"unknown {kind} model {spec!r}; known: " + ", ".join(known_models()[kind])


def test_stt_unknown_model_message_matches_the_documented_form() -> None:
    with pytest.raises(
        UnknownModelError,
        match=r"^unknown stt model 'x/y'; known: "
        r"local/whisper-tiny\.en, openai/<model>$",
    ):
        build_stt("x/y")


@pytest.mark.usefixtures("no_openai_key")
@pytest.mark.parametrize(
    ("build", "spec"),
    [
        (build_llm, "openai/gpt-4.1-mini"),
        (build_stt, "openai/gpt-4o-transcribe"),
        (build_tts, "openai/gpt-4o-mini-tts"),
    ],
)
def test_openai_without_key_names_the_env_var(build: object, spec: str) -> None:
    assert callable(build)
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY") as info:
        build(spec)
    assert "\n" not in str(info.value)


@pytest.mark.usefixtures("no_openai_key")
async def test_openai_llm_with_base_url_builds_the_plugin_without_a_key() -> None:
    model = build_llm("openai/qwen2.5-7b", base_url="http://127.0.0.1:8000/v1", temperature=0.3)
    try:
        assert isinstance(model, openai.LLM)
        assert model.model == "qwen2.5-7b"
        assert model.provider == "127.0.0.1:8000"
    finally:
        await model.aclose()


async def test_openai_stt_and_tts_use_the_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    stt_model = build_stt("openai/gpt-4o-transcribe")
    tts_model = build_tts("openai/gpt-4o-mini-tts", voice="ash")
    try:
        assert isinstance(stt_model, openai.STT) and stt_model.model == "gpt-4o-transcribe"
        assert isinstance(tts_model, openai.TTS) and tts_model.model == "gpt-4o-mini-tts"
    finally:
        await stt_model.aclose()
        await tts_model.aclose()


def test_unknown_options_are_config_errors() -> None:
    with pytest.raises(ModelConfigError, match="beam_sizee"):
        build_stt("local/whisper-tiny.en", beam_sizee=3)
    with pytest.raises(ModelConfigError, match="max_tokenz"):
        build_llm("local/smollm2-135m", max_tokenz=3)
    with pytest.raises(ModelConfigError, match="base_url"):
        build_llm("local/smollm2-135m", base_url="http://localhost:1234/v1")
    with pytest.raises(ModelConfigError, match="voice"):
        build_tts("local/piper-joe", voice="amy")


def test_local_models_build_cheaply_with_their_capabilities() -> None:
    stt_model = build_stt("local/whisper-tiny.en", beam_size=3)
    assert isinstance(stt_model, WhisperSTT)
    assert not stt_model.capabilities.streaming and not stt_model.capabilities.interim_results

    tts_model = build_tts("local/piper-joe", sample_rate=8000)
    assert isinstance(tts_model, PiperTTS)
    assert not tts_model.capabilities.streaming
    assert (tts_model.sample_rate, tts_model.num_channels) == (8000, 1)

    llm_model = build_llm("local/smollm2-135m", max_tokens=20)
    assert isinstance(llm_model, LlamaLLM) and llm_model.options.max_tokens == 20
    assert build_llm("local/smollm2-135m") is not build_llm("local/smollm2-135m")


@pytest.mark.parametrize(
    ("text", "sample_rate", "seconds"),
    [("x" * 40, 16000, 2.6), ("Hi.", 16000, 0.2), ("Thanks, goodbye!", 8000, 16 * 0.065)],
)
async def test_estimate_tts_speaks_silence_for_the_estimated_time(
    text: str, sample_rate: int, seconds: float
) -> None:
    model = build_tts("local/estimate", sample_rate=sample_rate)
    assert isinstance(model, EstimateTTS)
    assert estimated_duration(text) == pytest.approx(seconds)
    frames = []
    async with model.synthesize(text) as stream:
        async for ev in stream:
            frames.append(ev.frame)
    assert sum(f.duration for f in frames) == pytest.approx(seconds, abs=1e-3)
    assert {f.sample_rate for f in frames} == {sample_rate}
    assert max(f.duration for f in frames) <= 0.1
    assert not any(any(f.data) for f in frames)


def test_chat_context_becomes_role_content_messages() -> None:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="system", content="You are a phone agent.")
    ctx.add_message(role="developer", content="Be brief.")
    ctx.add_message(role="user", content="Hello?")
    ctx.insert(llm.FunctionCall(call_id="c1", name="lookup", arguments="{}"))
    ctx.insert(llm.FunctionCallOutput(call_id="c1", name="lookup", output="ok", is_error=False))
    ctx.add_message(role="assistant", content="Hi, how can I help?")
    ctx.add_message(role="system", content="The caller sounds upset.")
    ctx.add_message(role="user", content="   ")
    assert chat_ctx_to_messages(ctx) == [
        {"role": "system", "content": "You are a phone agent.\nBe brief."},
        {"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "system", "content": "The caller sounds upset."},
    ]


def test_instructions_lead_the_prompt_even_after_a_spoken_greeting() -> None:
    # a greeting said before the first request sits before the instructions in the
    # history; the prompt still starts with them, so every request shares its prefix
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="assistant", content="Hi, this is Sam from Acme Dental.")
    ctx.add_message(role="system", content="You are a phone agent.")
    ctx.add_message(role="user", content="Who is this?")
    ctx.add_message(role="system", content="Keep it short.")
    assert chat_ctx_to_messages(ctx) == [
        {"role": "system", "content": "You are a phone agent."},
        {"role": "assistant", "content": "Hi, this is Sam from Acme Dental."},
        {"role": "user", "content": "Who is this?"},
        {"role": "system", "content": "Keep it short."},
    ]


def test_long_history_is_trimmed_from_the_oldest_turn() -> None:
    messages = [{"role": "system", "content": "s" * 30}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}" * 300} for i in range(10)
    ]
    fitted = fit_messages(messages, budget_tokens=350)
    assert fitted[0] == messages[0]
    assert fitted[-1] == messages[-1]
    assert fitted[1:] == messages[-(len(fitted) - 1) :]
    assert len(fitted) == 4
    assert (
        fit_messages(messages[:1] + messages[-1:], budget_tokens=1) == messages[:1] + messages[-1:]
    )


# -- decision models -----------------------------------------------------------


def test_decision_model_strings_build_the_matching_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from livekit.agents import inference

    from agent.models.registry import build_decision_model
    from guardrails.llm_model import LlmDecisionModel
    from guardrails.rules import RulesDecisionModel
    from tests.fakes.models import ScriptedLLM

    assert isinstance(build_decision_model("rules"), RulesDecisionModel)
    session = ScriptedLLM()
    own = build_decision_model("llm", session_llm=session)
    assert isinstance(own, LlmDecisionModel) and own.model == "scripted"
    local = build_decision_model("llm:local/smollm2-135m")
    assert isinstance(local, LlmDecisionModel) and isinstance(local.wrapped_llm, LlamaLLM)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    remote = build_decision_model("openai/gpt-6-luna-decisions")
    assert isinstance(remote, openai.DecisionModel) and remote.model == "gpt-6-luna-decisions"

    monkeypatch.setenv("LIVEKIT_API_KEY", "key")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "secret")
    gateway = build_decision_model("inference/typesafe/jev")
    assert isinstance(gateway, inference.DecisionModel) and gateway.model == "typesafe/jev"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("openai/gpt-6-luna-decisions", "OPENAI_API_KEY"),
        ("inference/openai/gpt-6-luna-decisions", "LIVEKIT_INFERENCE_API_KEY"),
        ("llm", "agent's LLM"),
    ],
)
def test_decision_models_without_credentials_name_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, spec: str, needle: str
) -> None:
    from agent.models.registry import build_decision_model

    for var in (
        "OPENAI_API_KEY",
        "LIVEKIT_API_KEY",
        "LIVEKIT_API_SECRET",
        "LIVEKIT_INFERENCE_API_KEY",
        "LIVEKIT_INFERENCE_API_SECRET",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelConfigError, match=needle):
        build_decision_model(spec)


@pytest.mark.parametrize("spec", ["nosuch", "inference/jev", "openai/"])
def test_unknown_decision_models_list_the_known_forms(spec: str) -> None:
    from agent.models.registry import build_decision_model

    with pytest.raises(UnknownModelError, match="decision model|inference/<provider>/<model>"):
        build_decision_model(spec)


def test_the_factory_builds_each_model_once_and_guards_with_a_fallback() -> None:
    from agent.app.guarding import GuardrailFactory
    from guardrails.config import GuardrailsConfig
    from guardrails.guarded import GuardedDecisionModel
    from tests.fakes.models import ScriptedLLM

    factory = GuardrailFactory(session_llm=ScriptedLLM())
    plain = GuardrailsConfig(model="rules")
    assert factory.decision_model(plain) is factory.decision_model(plain)
    with_fallback = GuardrailsConfig(model="llm", fallback="rules", fallback_timeout=0.5)
    guarded = factory.decision_model(with_fallback)
    assert isinstance(guarded, GuardedDecisionModel)
    assert guarded.fallback is factory.decision_model(plain)  # shared, not rebuilt
    assert guarded.timeout == 0.5
