"""One-line agent config errors: the true source, its line, the key and a "did you mean".

A value can come from the config file, from ``configs/default.yaml`` under it,
from a ``CALLRT_*`` environment variable, or from a recorded call's ``agent:``
overrides. :func:`describe_error` names the one that said the bad value, with the
line of its key when it is a file, as recorded-call errors do::

    agent.yaml:3: turn.min_endpointing_dely: unknown key (did you mean 'min_endpointing_delay'?)
    CALLRT_MODELS__LLM (environment variable): models.llm: unknown llm model 'local/nope'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.app.config_env import env_variable

__all__ = ["describe_error", "key_line"]

Loc = tuple[str | int, ...]


def key_line(path: Path, loc: Loc) -> int | None:
    """The 1-based line of the key (or list item) at ``loc`` in a YAML file, or None."""
    try:
        node: Node | None = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    line: int | None = None
    for part in loc:
        if isinstance(node, MappingNode):
            match = [
                (k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == str(part)
            ]
            if not match:
                return line
            line, node = match[0][0].start_mark.line + 1, match[0][1]
        elif isinstance(node, SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The pydantic model of the mapping at ``loc`` (ints are list items)."""

    def find(annotation: Any) -> type[BaseModel] | None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        return next((m for arg in get_args(annotation) if (m := find(arg))), None)

    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part)) if current else None
        current = find(field.annotation) if field else None
    return current


def _did_you_mean(word: object, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _message(error: Mapping[str, Any], loc: Loc, model: type[BaseModel]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        return f"unknown key{_did_you_mean(loc[-1], list(parent.model_fields) if parent else [])}"
    msg = str(error["msg"]).removeprefix("Value error, ")
    if kind == "literal_error":
        options = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return msg + _did_you_mean(error.get("input"), options)
    return msg


def _data_loc(data: Any, loc: Sequence[Any]) -> Loc:
    """``loc`` without pydantic's tags (union members, validators) that are not in the data."""
    out: list[str | int] = []
    for part in loc:
        if isinstance(data, dict) and part in data:
            out.append(part)
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            out.append(part)
            data = data[part]
        elif isinstance(data, dict):  # a missing or unknown key: name it, stop there
            out.append(part)
            break
    return tuple(out)


def describe_error(
    exc: ValidationError,
    *,
    data: Mapping[str, Any],
    model: type[BaseModel],
    source: str,
    files: Sequence[Path] = (),
    prefix: str = "",
    environment: bool = True,
    renames: Mapping[Loc, tuple[Loc, Path]] | None = None,
) -> str:
    """The first error of ``exc`` as ``SOURCE[:LINE]: KEY: MESSAGE``.

    Args:
        exc: The validation error.
        data: The data that was validated (to drop pydantic's union tags from keys).
        model: The validated model (for "did you mean" on unknown keys).
        source: What to name when nothing more precise is known (the file given).
        files: YAML files the data came from, most specific first: the first that has
            the key gives its path and line.
        prefix: Put before the key (``agent.`` for a recorded call's overrides).
        environment: Whether ``CALLRT_*`` variables took part (they win over files).
        renames: Keys of the merged data that sit elsewhere in the file that said
            them, by key prefix: ``{("guardrails", "checks", 4): (("guardrails",
            "checks", 0), Path("agent.yaml"))}`` (a file's checks follow the defaults').
    """
    error = exc.errors()[0]
    loc = _data_loc(data, error["loc"])
    message = _message(error, loc, model)
    key = ".".join(str(p) for p in loc)
    where = source
    variable = env_variable(key) if environment else None
    if variable is None:
        for merged, (written, path) in (renames or {}).items():
            if loc[: len(merged)] == merged:
                loc, files = (*written, *loc[len(merged) :]), [path]
                key = ".".join(str(p) for p in loc)
                break
    if variable is not None:
        where = f"{variable} (environment variable)"
    else:
        in_file = (*(part for part in prefix.split(".") if part), *loc)
        for path in files:
            line = key_line(path, in_file)
            if line is not None:
                where = f"{path}:{line}"
                break
    return f"{where}: {prefix}{key}: {message}"
