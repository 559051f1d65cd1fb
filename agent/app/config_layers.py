"""How an agent config file is layered over the built-in defaults (pure; no I/O).

Every agent config starts from ``configs/default.yaml`` (models, turn taking,
AMD, guardrails, ...) and overrides what it names. The merge rules, per key:

- a mapping merges key by key, recursively (``models: {llm: ...}`` keeps the
  default STT, TTS and VAD);
- a scalar or a list replaces the default (``tools``, ``guardian.numbers``,
  ``guardrails.packs``, ``guardrails.response``), with one exception:
- ``guardrails.checks`` extends the default checks by name: a check with the
  name of a default check replaces it in place, other checks are appended. An
  empty list (``checks: []``) removes every default check;
- ``guardrails: {inherit: false, ...}`` starts the guardrails section from the
  empty built-in one instead of the defaults.

A config that ends up without one of the default checks this way has opted out;
the run logs a warning naming the file and the dropped checks once the config has
loaded and its models are built (not for a config that fails). Environment variables (``CALLRT_*``)
override the result (see :mod:`agent.app.config`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Layered", "merge_layers", "check_name", "value_sources"]


@dataclass(frozen=True)
class Layered:
    """The merged config data, and whether the file dropped default guardrail checks."""

    data: dict[str, Any]
    opted_out: bool
    #: where each merged guardrail check came from: ``("file", i)`` is the file's
    #: ``guardrails.checks[i]``, ``("default", i)`` the default's (so an error in a
    #: check names the index the user wrote)
    check_origins: tuple[tuple[str, int], ...] = ()


def check_name(check: Any) -> str:
    """A guardrail check's name as the runtime names it (its decisions when unnamed)."""
    if not isinstance(check, Mapping):
        return ""
    name = check.get("name")
    if name:
        return str(name)
    decisions = check.get("decisions")
    if isinstance(decisions, Mapping):
        return "_".join(str(d) for d in decisions)
    if isinstance(decisions, list):
        return "_".join(str(d) for d in decisions)
    return ""


def merge_layers(default: Mapping[str, Any], file: Mapping[str, Any], *, source: str) -> Layered:
    """``file`` over ``default`` by the module's rules.

    Raises:
        ValueError: ``guardrails`` (or its ``inherit``/``checks``) has the wrong shape;
            the message names the file and the key.
    """
    out = _deep_merge(dict(default), {k: v for k, v in file.items() if k != "guardrails"})
    default_checks = list((default.get("guardrails") or {}).get("checks") or [])
    if "guardrails" not in file:
        return Layered(out, False, tuple(("default", i) for i in range(len(default_checks))))
    over = file["guardrails"]
    if not isinstance(over, Mapping):
        raise ValueError(
            f"{source}: guardrails: expected a mapping "
            "(to drop the default guardrails: guardrails: {inherit: false})"
        )
    over = dict(over)
    inherit = over.pop("inherit", True)
    if not isinstance(inherit, bool):
        raise ValueError(f"{source}: guardrails.inherit: expected true or false, got {inherit!r}")
    base = dict(default.get("guardrails") or {}) if inherit else {}
    checks_over = over.pop("checks", None)
    merged = _deep_merge(base, over)
    inherited = default_checks if inherit else []
    if checks_over is None:
        checks_over = []
    elif not isinstance(checks_over, list):
        raise ValueError(f"{source}: guardrails.checks: expected a list of checks")
    elif not checks_over:
        inherited = []
    checks, origins = _extend_by_name(inherited, checks_over)
    if checks:
        merged["checks"] = checks
    else:
        merged.pop("checks", None)
    out["guardrails"] = merged
    kept = {check_name(c) for c in checks}
    dropped = any(check_name(c) not in kept for c in default_checks)
    return Layered(out, dropped, origins)


def _extend_by_name(
    default: list[Any], over: list[Any]
) -> tuple[list[Any], tuple[tuple[str, int], ...]]:
    out = list(default)
    origins = [("default", i) for i in range(len(out))]
    index = {check_name(c): i for i, c in enumerate(out)}
    for j, check in enumerate(over):
        name = check_name(check)
        if name and name in index:
            out[index[name]] = check
            origins[index[name]] = ("file", j)
        else:
            out.append(check)
            origins.append(("file", j))
    return out, tuple(origins)


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def _leaves(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, Mapping) and data:
        for k, v in data.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, data


def _env_keys(environ: Mapping[str, str]) -> set[str]:
    keys = set()
    for name in environ:
        if name.startswith("CALLRT_"):
            keys.add(name.removeprefix("CALLRT_").lower().replace("__", "."))
    return keys


def value_sources(
    effective: Mapping[str, Any],
    default: Mapping[str, Any],
    file: Mapping[str, Any] | None,
    *,
    call: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[tuple[str, str, str]]:
    """Each effective value with where it came from, as ``(key, JSON value, source)``.

    Sources, highest first: ``call`` (a recorded call's ``agent:`` overrides),
    ``environment`` (a ``CALLRT_*`` variable), ``file`` (the agent config),
    ``default`` (``configs/default.yaml``), ``built-in`` (the code's default). Keys are
    dotted; each guardrail check is one row, ``guardrails.checks[NAME]``.
    """
    env = _env_keys(os.environ if environ is None else environ)
    call_leaves = dict(_leaves(call)) if call else {}
    file_leaves = dict(_leaves(file)) if file else {}
    default_leaves = dict(_leaves(default))
    file_checks = {check_name(c) for c in ((file or {}).get("guardrails") or {}).get("checks", [])}
    rows: list[tuple[str, str, str]] = []

    def origin(key: str) -> str:
        if any(k == key or k.startswith(key + ".") for k in call_leaves):
            return "call"
        parts = key.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in env:
                return "environment"
        if any(k == key or k.startswith(key + ".") for k in file_leaves):
            return "file"
        if any(k == key or k.startswith(key + ".") for k in default_leaves):
            return "default"
        return "built-in"

    for key, value in _leaves(effective):
        if key == "guardrails.checks" and isinstance(value, list):
            for check in value:
                name = check_name(check)
                src = "file" if name in file_checks else "default"
                if origin(key) in ("environment", "call"):
                    src = origin(key)
                rows.append((f"guardrails.checks[{name}]", _compact(check), src))
            continue
        rows.append((key, _compact(value), origin(key)))
    return rows


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
