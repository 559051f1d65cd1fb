"""Load recorded calls from ``*.call.yaml`` files and folders.

Every error names the file, the line and the key, on one line::

    tests/calls/x.call.yaml:14: callee[2].tone.hz: expected a frequency in Hz ...

YAML is composed into nodes (which keep their marks), converted to plain data while
recording the line of every key and list item, and validated with the pydantic
models of :mod:`agent.telephony.sim.recorded_call`; each validation error's location is mapped
back to a line. Only the first error (by line) is reported.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.telephony.sim.recorded_call import FormatProblem, RecordedCall, describe_value

__all__ = ["RecordedCallError", "load_call", "load_paths"]

Loc = tuple[str | int, ...]
_MAX_DEPTH = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"


class RecordedCallError(Exception):
    """A recorded call (or a path naming calls) that cannot be loaded.

    Attributes:
        file: The file or folder at fault.
        line: 1-based line in ``file``, or None when not about a line.
        key: Dotted path of the offending key, e.g. ``callee[2].tone.hz``, or None.
        message: What is wrong and what was expected.
    """

    def __init__(self, file: Path | str, line: int | None, key: str | None, message: str) -> None:
        super().__init__(file, line, key, message)
        self.file = Path(file)
        self.line = line
        self.key = key or None
        self.message = " ".join(message.split())

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class _ShapeError(Exception):
    def __init__(self, line: int, loc: Loc, message: str) -> None:
        super().__init__(message)
        self.line, self.loc, self.message = line, loc, message


class _Document:
    """Plain data converted from YAML nodes, with the line of every key and item."""

    def __init__(self, root: Node) -> None:
        self._constructor = SafeConstructor()
        self.lines: dict[Loc, int] = {}
        self.data = self._convert(root, ())

    def line_of(self, loc: Loc) -> int:
        """Line of ``loc``, else of its nearest enclosing key or item (e.g. a missing key)."""
        for end in range(len(loc), -1, -1):
            if loc[:end] in self.lines:
                return self.lines[loc[:end]]
        return 1

    def _convert(self, node: Node, loc: Loc) -> Any:
        line = node.start_mark.line + 1
        self.lines.setdefault(loc, line)
        if len(loc) > _MAX_DEPTH:
            raise _ShapeError(line, loc[:1], "nested too deeply (a recursive YAML alias?)")
        if isinstance(node, SequenceNode):
            return [self._convert(item, (*loc, i)) for i, item in enumerate(node.value)]
        if not isinstance(node, MappingNode):
            return self._constructor.construct_object(node, deep=True)
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node, loc)
            if key in seen:
                raise _ShapeError(key_node.start_mark.line + 1, (*loc, key), "duplicate key")
            seen.add(key)
        self._constructor.flatten_mapping(node)  # resolves `<<: *anchor` merges in place
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node, loc)
            self.lines[(*loc, key)] = key_node.start_mark.line + 1
            out[key] = self._convert(value_node, (*loc, key))
        return out

    def _key(self, node: Node, loc: Loc) -> str:
        key = self._constructor.construct_object(node) if isinstance(node, ScalarNode) else None
        if not isinstance(key, str | int | float | bool):
            raise _ShapeError(node.start_mark.line + 1, loc, "keys must be plain words")
        return key if isinstance(key, str) else describe_value(key)  # `1:` names key '1'


def _format_key(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model that validates the mapping at ``loc`` (ints are list items)."""

    def find(annotation: Any) -> type[BaseModel] | None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        return next((m for arg in get_args(annotation) if (m := find(arg))), None)

    model: type[BaseModel] | None = RecordedCall
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model else None
        model = find(field.annotation) if field else None
    return model


def _data_loc(data: Any, loc: Loc) -> Loc:
    """``loc`` without pydantic's tags (union members, validators) that are not in the file."""
    out: list[str | int] = []
    for part in loc:
        if isinstance(data, dict):
            out.append(part)
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int):
            out.append(part)
            data = data[part] if 0 <= part < len(data) else None
    return tuple(out)


def _did_you_mean(word: Any, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


_SIMPLE_MESSAGES = {
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "dict_type": "expected a mapping of keys",
    "path_type": "expected a file path",
}
_BOUNDS = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
}


def _describe(error: ErrorDetails, loc: Loc) -> tuple[str, Loc]:
    """A user-facing message for one pydantic error, and the location it is about."""
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    got = f"got {describe_value(value)}"
    if kind in ("value_error", "assertion_error") and isinstance(ctx.get("error"), Exception):
        problem = ctx["error"]
        return str(problem), loc + (problem.loc if isinstance(problem, FormatProblem) else ())
    if kind == "missing":
        return f"required key {loc[-1]!r} is missing", loc
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = list(model.model_fields) if model else []
        hint = _did_you_mean(loc[-1], allowed) or (
            f" (expected one of: {', '.join(allowed)})" if allowed else ""
        )
        return f"unknown key {loc[-1]!r}{hint}", loc
    if kind == "literal_error":
        options = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        hint = _did_you_mean(value, options)
        return f"expected {ctx.get('expected')}, {got}{hint}", loc
    if kind == "model_type":
        model = _model_at(loc)
        keys = f" ({', '.join(model.model_fields)})" if model else ""
        return f"expected a mapping of keys{keys}, {got}", loc
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()), "?")
        limit = f"{limit:g}" if isinstance(limit, int | float) else limit
        return f"expected a number {_BOUNDS[kind]} {limit}, {got}", loc
    if kind in ("too_short", "string_too_short"):
        return f"expected at least {ctx.get('min_length', 1)} item(s), {got}", loc
    if kind in _SIMPLE_MESSAGES:
        return f"{_SIMPLE_MESSAGES[kind]}, {got}", loc
    return f"{error['msg']}, {got}", loc


def _first_error(path: Path, doc: _Document, exc: ValidationError) -> RecordedCallError:
    found = []
    for order, error in enumerate(exc.errors()):
        message, loc = _describe(error, _data_loc(doc.data, error["loc"]))
        found.append((doc.line_of(loc), order, loc, message))
    line, _, loc, message = min(found, key=lambda item: (item[0], item[1]))
    return RecordedCallError(path, line, _format_key(loc), message)


def _read(path: Path) -> tuple[RecordedCall, _Document]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordedCallError(path, None, None, "no such file") from None
    except UnicodeDecodeError:
        raise RecordedCallError(path, None, None, "not UTF-8 text") from None
    except OSError as exc:
        raise RecordedCallError(path, None, None, f"cannot read: {exc.strerror}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        doc = _Document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = "; ".join(str(p) for p in (exc.context, exc.problem) if p)
        line = mark.line + 1 if mark else None
        raise RecordedCallError(path, line, None, f"invalid YAML: {detail}") from None
    except yaml.YAMLError as exc:
        raise RecordedCallError(path, None, None, f"invalid YAML: {exc}") from None
    except _ShapeError as exc:
        raise RecordedCallError(path, exc.line, _format_key(exc.loc), exc.message) from None
    if doc is None:
        raise RecordedCallError(path, 1, None, "empty file: expected a recorded call")
    if not isinstance(doc.data, dict):
        got = "a list" if isinstance(doc.data, list) else describe_value(doc.data)
        message = f"expected a mapping of keys, got {got}"
        raise RecordedCallError(path, doc.line_of(()), None, message)
    try:
        call = RecordedCall.model_validate(doc.data, context={"source_path": path})
    except ValidationError as exc:
        raise _first_error(path, doc, exc) from None
    return call, doc


def load_call(path: Path | str) -> RecordedCall:
    """Load and validate one ``*.call.yaml`` file.

    Audio files named by ``audio:`` must exist and be readable; they are resolved
    against the YAML file's folder and stored as absolute paths.

    Args:
        path: The YAML file.

    Returns:
        The validated call, with ``source_path`` set to ``path``.

    Raises:
        RecordedCallError: The file is missing, is not valid YAML or breaks the format.
    """
    return _read(Path(path))[0]


def load_paths(paths: Sequence[Path | str]) -> list[RecordedCall]:
    """Load the calls named by files and folders, in order.

    A folder contributes every ``*.call.yaml`` file directly in it, sorted by file
    name. A file named twice is loaded once. Call names must be unique across
    everything loaded.

    Args:
        paths: ``*.call.yaml`` files and folders of them.

    Returns:
        The calls, in the order of ``paths`` (folders expanded).

    Raises:
        RecordedCallError: A path does not exist, a folder has no calls, a file is
            not a ``*.call.yaml`` file or is invalid, or two calls share a name.
    """
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(
                (f for f in path.glob("*.call.yaml") if f.is_file() and not f.name.startswith(".")),
                key=lambda f: f.name,
            )
            if not found:
                nested = any(f.is_file() for f in path.glob("*/**/*.call.yaml"))
                hint = " (subfolders are not searched: name them)" if nested else ""
                raise RecordedCallError(
                    path, None, None, f"no *.call.yaml files in this folder{hint}"
                )
            files.extend(found)
        elif not path.exists():
            raise RecordedCallError(path, None, None, "no such file or folder")
        elif not path.name.endswith(".call.yaml"):
            raise RecordedCallError(path, None, None, "expected a *.call.yaml file or a folder")
        else:
            files.append(path)
    calls: list[RecordedCall] = []
    first_seen: dict[str, Path] = {}
    loaded: set[Path] = set()
    for file in files:
        if file.resolve() in loaded:
            continue
        loaded.add(file.resolve())
        call, doc = _read(file)
        if call.name in first_seen:
            raise RecordedCallError(
                file,
                doc.line_of(("name",)),
                "name",
                f"duplicate call name {call.name!r}: also in {first_seen[call.name]}",
            )
        first_seen[call.name] = file
        calls.append(call)
    return calls
