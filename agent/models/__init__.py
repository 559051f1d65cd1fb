"""Local and cloud STT/TTS/LLM/VAD models as livekit plugin objects, built from names.

Importing this package is cheap: model libraries and weights load on first use.
"""

from agent.models.registry import (
    ModelConfigError,
    UnknownModelError,
    build_llm,
    build_stt,
    build_tts,
    build_vad,
    known_models,
    prewarm,
)

__all__ = [
    "ModelConfigError",
    "UnknownModelError",
    "build_llm",
    "build_stt",
    "build_tts",
    "build_vad",
    "known_models",
    "prewarm",
]
