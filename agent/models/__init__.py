"""Local and cloud STT/TTS/LLM/VAD models as livekit plugin objects, built from names.

Importing this package is cheap: model libraries and weights load on first use. It
sets ``GOMP_SPINCOUNT`` unless the environment chose an OpenMP wait policy, before any
OpenMP runtime loads (see :mod:`agent.models.threads`).
"""

from agent.models.threads import limit_openmp_spin

limit_openmp_spin()

from agent.models.registry import (  # noqa: E402 (after the OpenMP setting)
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
