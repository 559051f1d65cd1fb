"""Which ``CALLRT_*`` environment variable set a config key, for error messages.

An agent config value can come from the YAML file or from an environment variable
(``CALLRT_MODELS__LLM`` sets ``models.llm``; ``CALLRT_MODELS`` as JSON sets all of
``models``). An error about a value must name where the value came from, not the
file that did not say it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["ENV_PREFIX", "env_variable", "model_key", "value_source"]

ENV_PREFIX = "CALLRT_"
_NESTED = "__"


def env_variable(key: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable that sets ``key`` (dotted, as in error messages) or a parent of it.

    Args:
        key: A config key such as ``models.llm`` or ``guardrails.checks.0.name``.
        environ: The environment (default ``os.environ``); names match in any case,
            as pydantic-settings reads them.

    Returns:
        The variable's name as it is set, or None when the file (or a default) said it.
    """
    env = os.environ if environ is None else environ
    by_upper = {name.upper(): name for name in env if name.upper().startswith(ENV_PREFIX)}
    parts = [p for p in key.split(".") if p]
    for end in range(len(parts), 0, -1):
        name = ENV_PREFIX + _NESTED.join(parts[:end]).upper()
        if name in by_upper:
            return by_upper[name]
    return None


def value_source(key: str, file: str, environ: Mapping[str, str] | None = None) -> str:
    """``file``, or ``NAME (environment variable)`` when the environment set ``key``."""
    name = env_variable(key, environ)
    return f"{name} (environment variable)" if name else file


def model_key(message: str, models: Any) -> str:
    """Which ``models.*`` key a model error is about: the one whose string it names.

    Args:
        message: The registry's error message.
        models: The config's ``ModelsConfig``.
    """
    # the registry names the model string first: "<spec>: unknown option(s) ...", or
    # a plugin's "<spec>: ... got an unexpected keyword argument ..."
    about_options = "option" in message or "argument" in message
    for kind in ("stt", "llm"):
        spec = getattr(models, kind)
        if about_options and getattr(models, f"{kind}_options") and message.startswith(f"{spec}:"):
            return f"models.{kind}_options"
    if "option" in message and models.llm_options:
        return "models.llm_options"
    for key, value in models.model_dump().items():
        if isinstance(value, str) and value and value in message:
            return f"models.{key}"
    return "models"
