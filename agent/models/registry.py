"""Turn model names from config (``local/whisper-tiny.en``, ``openai/gpt-4.1-mini``, ...)
into livekit plugin objects.

Weights are only ever loaded from installed packages or local paths; nothing is
downloaded. Building is cheap: local weights load on first use (or through
:func:`prewarm`) and are cached per process, so every call in a worker shares one copy,
while each ``build_*`` call returns a fresh plugin object (its event listeners, and so
its metrics, belong to one session).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from typing import Any

from livekit.agents import llm, stt, tts, vad

WHISPER_TINY_EN = "local/whisper-tiny.en"
PIPER_JOE = "local/piper-joe"
ESTIMATE_TTS = "local/estimate"
SMOLLM2_135M = "local/smollm2-135m"
SILERO = "silero"
OPENAI_PREFIX = "openai/"
OPENAI_KEY_ENV = "OPENAI_API_KEY"

_KNOWN: dict[str, list[str]] = {
    "stt": [WHISPER_TINY_EN, "openai/<model>"],
    "tts": [PIPER_JOE, ESTIMATE_TTS, "openai/<model>"],
    "llm": [SMOLLM2_135M, "openai/<model>", "script:<file.yaml>"],
    "vad": [SILERO],
}

# telephone turn-taking: end a turn after 0.5 s of silence (livekit's default is 0.55 s)
SILERO_DEFAULTS: dict[str, Any] = {"min_silence_duration": 0.5}

_VADS: dict[tuple[tuple[str, Any], ...], vad.VAD] = {}
_VADS_LOCK = threading.Lock()


class UnknownModelError(ValueError):
    """A model name that the registry does not know for that kind of model."""


class ModelConfigError(ValueError):
    """A known model that cannot be built as configured (missing credentials, bad option)."""


def known_models() -> dict[str, list[str]]:
    """Model names per kind (``stt``, ``tts``, ``llm``, ``vad``).

    Returns:
        A fresh dict; ``openai/<model>`` stands for any OpenAI model name.
    """
    return {kind: list(names) for kind, names in _KNOWN.items()}


def build_stt(spec: str, *, vad: vad.VAD | None = None, **opts: Any) -> stt.STT:
    """Build a speech-to-text model.

    Args:
        spec: ``local/whisper-tiny.en`` or ``openai/<model>``.
        vad: the session's VAD. The local model segments speech with it and transcribes
            while the callee speaks (``StreamingWhisperSTT``); without one, or with
            ``streaming=False``, it is the batch ``WhisperSTT``, which AgentSession pairs
            with its own VAD and transcribes once each utterance has ended. Cloud STTs
            ignore it.
        **opts: for the local model, fields of ``WhisperOptions`` (``model_path``,
            ``beam_size``, ``cpu_threads``, ``streaming``, ``interim_every``, ...); for
            OpenAI, ``base_url``, ``api_key`` and any ``openai.STT`` argument.

    Returns:
        A livekit STT.

    Raises:
        UnknownModelError: ``spec`` is not a known STT.
        ModelConfigError: missing credentials or an unknown option.
    """
    if spec == WHISPER_TINY_EN:
        from agent.models.whisper_stt import WhisperOptions, WhisperSTT

        options = _dataclass_options(WhisperOptions, spec, opts)
        if vad is not None and options.streaming:
            from agent.models.whisper_stream import StreamingWhisperSTT

            return StreamingWhisperSTT(vad=vad, options=options)
        return WhisperSTT(options=options)
    if model := _openai_model("stt", spec):
        from livekit.plugins import openai

        client = _openai_client(spec, opts.pop("base_url", None), opts.pop("api_key", None))
        return _construct(spec, openai.STT, model=model, **client, **opts)
    raise _unknown("stt", spec)


def build_tts(spec: str, *, sample_rate: int = 16000, **opts: Any) -> tts.TTS:
    """Build a text-to-speech model.

    Args:
        spec: ``local/piper-joe``, ``local/estimate`` or ``openai/<model>``.
        sample_rate: output rate of the local models. OpenAI TTS always produces
            24 kHz; read ``tts.sample_rate`` rather than assuming this value.
        **opts: for piper, ``model_path`` / ``config_path``; for OpenAI, ``voice``,
            ``base_url``, ``api_key`` and any ``openai.TTS`` argument.

    Returns:
        A livekit TTS (non-streaming: AgentSession feeds it one sentence at a time).

    Raises:
        UnknownModelError: ``spec`` is not a known TTS.
        ModelConfigError: missing credentials or an unknown option.
    """
    if spec == PIPER_JOE:
        from agent.models.piper_tts import PiperTTS

        return _construct(spec, PiperTTS, sample_rate=sample_rate, **opts)
    if spec == ESTIMATE_TTS:
        from agent.models.estimate_tts import EstimateTTS

        return _construct(spec, EstimateTTS, sample_rate=sample_rate, **opts)
    if model := _openai_model("tts", spec):
        from livekit.plugins import openai

        client = _openai_client(spec, opts.pop("base_url", None), opts.pop("api_key", None))
        return _construct(spec, openai.TTS, model=model, **client, **opts)
    raise _unknown("tts", spec)


def build_llm(spec: str, *, base_url: str | None = None, **opts: Any) -> llm.LLM:
    """Build a language model.

    Args:
        spec: ``local/smollm2-135m``, ``openai/<model>``, or ``script:<file.yaml>``
            (deterministic replies by pattern, for policy tests: see ``script_llm``).
        base_url: an OpenAI-compatible server; no API key is needed with one.
        **opts: for the local model, fields of ``LlamaOptions`` (``max_tokens``,
            ``temperature``, ``model_path``, ...); for OpenAI, ``api_key`` and any
            ``openai.LLM`` argument.

    Returns:
        A livekit LLM. The local one streams text and ignores tools.

    Raises:
        UnknownModelError: ``spec`` is not a known LLM.
        ModelConfigError: missing credentials or an unknown option.
    """
    if spec == SMOLLM2_135M:
        if base_url is not None:
            raise ModelConfigError(f"{spec} runs in-process; base_url applies to openai/<model>")
        from agent.models.llama_llm import LlamaLLM, LlamaOptions

        return LlamaLLM(options=_dataclass_options(LlamaOptions, spec, opts))
    if model := _openai_model("llm", spec):
        from livekit.plugins import openai

        client = _openai_client(spec, base_url, opts.pop("api_key", None))
        return _construct(spec, openai.LLM, model=model, **client, **opts)
    if spec.startswith("script:"):
        from agent.models.script_llm import ScriptError, ScriptLLM

        try:
            return ScriptLLM.from_file(spec.removeprefix("script:"))
        except ScriptError as exc:
            raise ModelConfigError(str(exc)) from None
    raise _unknown("llm", spec)


def build_vad(spec: str, **opts: Any) -> vad.VAD:
    """Build a voice activity detector.

    Args:
        spec: ``silero`` (the ONNX model ships inside livekit-plugins-silero).
        **opts: ``silero.VAD.load`` arguments; ``min_silence_duration`` defaults to 0.5 s.

    Returns:
        A fresh VAD object; the ONNX session is loaded once per process per option set.

    Raises:
        UnknownModelError: ``spec`` is not a known VAD.
        ModelConfigError: an unknown option.
    """
    if spec != SILERO:
        raise _unknown("vad", spec)
    from livekit.plugins import silero

    settings = {**SILERO_DEFAULTS, **opts}
    key = tuple(sorted(settings.items()))
    with _VADS_LOCK:
        loaded = _VADS.get(key)
        if loaded is None:
            loaded = _VADS[key] = _construct(spec, silero.VAD.load, **settings)
    assert isinstance(loaded, silero.VAD)
    # Not public API: silero.VAD has no way to build a second VAD on a loaded session.
    # Sharing one VAD object would mix calls' metrics (AgentSession subscribes to the
    # VAD's events); streams keep their own model state, and ONNX sessions are
    # thread-safe, so a new VAD on the cached session is safe.
    return silero.VAD(session=loaded._onnx_session, opts=dataclasses.replace(loaded._opts))


async def prewarm(*models: object) -> None:
    """Load the weights of the given local models in the executor.

    Other objects (cloud plugins, ``None``) are ignored. Safe to call repeatedly: the
    weights are cached per process.
    """
    from agent.models.llama_llm import LlamaLLM
    from agent.models.piper_tts import PiperTTS
    from agent.models.whisper_stt import WhisperSTT

    loop = asyncio.get_running_loop()
    for model in models:
        if isinstance(model, WhisperSTT | PiperTTS | LlamaLLM):
            await loop.run_in_executor(None, model.load)


def _unknown(kind: str, spec: str) -> UnknownModelError:
    return UnknownModelError(f"unknown {kind} model {spec!r}; known: {', '.join(_KNOWN[kind])}")


def _openai_model(kind: str, spec: str) -> str | None:
    if not spec.startswith(OPENAI_PREFIX):
        return None
    model = spec.removeprefix(OPENAI_PREFIX).strip()
    if not model:
        raise _unknown(kind, spec)
    return model


def _openai_client(spec: str, base_url: str | None, api_key: str | None) -> dict[str, str]:
    key = api_key or os.environ.get(OPENAI_KEY_ENV)
    if not key:
        if not base_url:
            raise ModelConfigError(
                f"{spec} needs the {OPENAI_KEY_ENV} environment variable "
                "(or base_url for an OpenAI-compatible server)"
            )
        # the openai client refuses an empty key; OpenAI-compatible servers ignore it
        key = "unused"
    client = {"api_key": key}
    if base_url:
        client["base_url"] = base_url
    return client


def _dataclass_options(cls: type[Any], spec: str, opts: dict[str, Any]) -> Any:
    names = [f.name for f in dataclasses.fields(cls)]
    if unknown := sorted(set(opts) - set(names)):
        raise ModelConfigError(
            f"{spec}: unknown option(s) {', '.join(unknown)}; expected: {', '.join(names)}"
        )
    try:
        return cls(**opts)
    except TypeError as e:  # an option of the wrong kind, checked by the options class
        raise ModelConfigError(f"{spec}: option {e}") from e


def _construct(spec: str, factory: Any, **kwargs: Any) -> Any:
    try:
        return factory(**kwargs)
    except TypeError as e:
        # an option the plugin does not take, e.g. "got an unexpected keyword argument"
        raise ModelConfigError(f"{spec}: {e}") from e


def build_amd_classifier(
    spec: str, *, session_llm: llm.LLM | None = None, base_url: str | None = None
) -> Any:
    """Build the AMD classifier (a livekit ``llm.DecisionModel``).

    Args:
        spec: ``lexical`` (built in, offline; returns None so AMD uses its own),
            ``session`` (the agent's own LLM) or an LLM model string.
        session_llm: The agent's LLM, for ``session``.
        base_url: An OpenAI-compatible server for ``openai/<model>``.

    Raises:
        UnknownModelError: ``spec`` is not a known LLM.
    """
    from amd.classifier import LlmAmdModel

    if spec == "lexical":
        return None
    if spec == "session":
        if session_llm is None:
            raise ModelConfigError("amd.classifier: session needs the agent's LLM")
        return LlmAmdModel(session_llm)
    return LlmAmdModel(build_llm(spec, base_url=base_url))


DECISION_MODELS = [
    "rules",
    "learned",
    "llm",
    "llm:<llm model>",
    "openai/<decision model>",
    "inference/<provider>/<model>",
]
_INFERENCE_PREFIX = "inference/"


def build_decision_model(
    spec: str,
    *,
    session_llm: llm.LLM | None = None,
    base_url: str | None = None,
    pack_dirs: list[str] | tuple[str, ...] = (),
) -> Any:
    """Build a guardrail decision model (a livekit ``llm.DecisionModel``).

    Args:
        spec: ``rules`` (built-in packs, offline), ``learned`` (the packs plus a
            learned classifier per pack, offline), ``llm`` (the agent's own LLM),
            ``llm:<llm model>`` (e.g. ``llm:local/smollm2-135m``), ``openai/<model>``
            (OpenAI's decisions API, needs ``OPENAI_API_KEY``) or
            ``inference/<provider>/<model>`` (LiveKit Inference, needs LiveKit credentials).
        session_llm: the agent's LLM, for ``llm``.
        base_url: an OpenAI-compatible server for ``llm:openai/<model>``.
        pack_dirs: extra rules-pack folders for ``rules`` and ``learned``.

    Raises:
        UnknownModelError: ``spec`` is not a known decision model.
        ModelConfigError: missing credentials.
    """
    if spec == "rules":
        from guardrails.rules import RulesDecisionModel

        return RulesDecisionModel(pack_dirs=tuple(pack_dirs))
    if spec == "learned":
        from guardrails.learned_model import LearnedDecisionModel

        return LearnedDecisionModel(pack_dirs=tuple(pack_dirs))
    if spec == "llm" or spec.startswith("llm:"):
        from guardrails.llm_model import LlmDecisionModel

        if spec == "llm":
            if session_llm is None:
                raise ModelConfigError("guardrails.model: llm needs the agent's LLM")
            return LlmDecisionModel(session_llm)
        return LlmDecisionModel(build_llm(spec.removeprefix("llm:"), base_url=base_url))
    if spec.startswith(_INFERENCE_PREFIX):
        model = spec.removeprefix(_INFERENCE_PREFIX)
        if "/" not in model:
            raise UnknownModelError(f"{spec!r}: expected inference/<provider>/<model>")
        if not (
            os.environ.get("LIVEKIT_INFERENCE_API_KEY") or os.environ.get("LIVEKIT_API_KEY")
        ) or not (
            os.environ.get("LIVEKIT_INFERENCE_API_SECRET") or os.environ.get("LIVEKIT_API_SECRET")
        ):
            raise ModelConfigError(
                f"{spec} needs LIVEKIT_INFERENCE_API_KEY and LIVEKIT_INFERENCE_API_SECRET "
                "(or LIVEKIT_API_KEY and LIVEKIT_API_SECRET)"
            )
        from livekit.agents import inference

        return inference.DecisionModel(model)
    if spec.startswith(OPENAI_PREFIX):
        model = spec.removeprefix(OPENAI_PREFIX).strip()
        if not model:
            raise UnknownModelError(f"{spec!r}: expected openai/<decision model>")
        if not os.environ.get(OPENAI_KEY_ENV):
            raise ModelConfigError(f"{spec} needs the {OPENAI_KEY_ENV} environment variable")
        from livekit.plugins import openai

        return openai.DecisionModel(model=model)
    raise UnknownModelError(f"unknown decision model {spec!r}; known: {', '.join(DECISION_MODELS)}")
