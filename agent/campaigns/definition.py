"""A campaign's definition: its YAML file and its contacts CSV.

Every error a user can cause is one line naming the file, the line and column
where known, and the key (or CSV column)::

    campaigns/spring.yaml:14:12: retry.after.busy: expected a duration like 90s, ...
    campaigns/spring.csv:7:2: number: expected an E.164 number like +15551234567 ...

The YAML is composed into nodes, which keep their positions, and read key by
key; values are taken from the text as written, so ``20:00`` is a time and
``+15550100000`` a number, not YAML 1.1 integers.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import time
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from agent.campaigns.policy import (
    DEFAULT_RETRY_AFTER,
    OUTCOMES,
    DncList,
    RetryPolicy,
    Window,
    parse_clock,
    parse_days,
    parse_duration,
    zone_exists,
    zones_for_number,
)
from agent.telephony.phone import parse_e164

__all__ = [
    "CampaignDefinitionError",
    "CampaignSpec",
    "Contact",
    "ContactsFile",
    "DEFAULT_WINDOWS",
    "load_campaign",
    "load_contacts",
]

#: Monday to Friday, 09:00 to 20:00 local time.
DEFAULT_WINDOWS = (Window(frozenset(range(5)), time(9), time(20)),)
_JSON_VERSION = 1


class CampaignDefinitionError(ValueError):
    """A campaign file or contacts CSV that cannot be used; ``str()`` is one line.

    Attributes:
        file: the file at fault.
        line: 1-based line, or None.
        column: 1-based column (a character in YAML, a field in CSV), or None.
        key: dotted key (``retry.after.busy``) or CSV column name, or None.
        message: what was expected and what was found.
    """

    def __init__(
        self,
        file: str | Path,
        line: int | None,
        column: int | None,
        key: str | None,
        message: str,
    ) -> None:
        self.file, self.line, self.column = str(file), line, column
        self.key, self.message = key, message
        where = self.file + "".join(f":{n}" for n in (line, column) if n is not None)
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


@dataclass(frozen=True)
class CampaignSpec:
    """How a campaign dials, as read from its YAML file.

    Attributes:
        agent: absolute path of the agent config, None for the built-in default.
        caller_id: the number calls come from, canonical E.164, or None.
        timezone: IANA zone for contacts whose zone cannot be told from the number.
        windows: local calling windows (in each callee's zones).
        max_concurrent: calls in flight at once.
        max_per_second: new dials per second.
        retry: when to call a contact again.
        dnc: the campaign's do-not-call list.
        priority: contact priority when the CSV does not give one.
        lease_seconds: how long a dialer holds a contact before another may take it.
        max_call_seconds: a cap on each call's length, or None.
    """

    agent: str | None = None
    caller_id: str | None = None
    timezone: str | None = None
    windows: tuple[Window, ...] = DEFAULT_WINDOWS
    max_concurrent: int = 2
    max_per_second: float = 1.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    dnc: DncList = field(default_factory=DncList)
    priority: int = 0
    lease_seconds: float = 30.0
    max_call_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {self.max_concurrent}")
        if not self.max_per_second > 0:
            raise ValueError(f"max_per_second must be above 0, got {self.max_per_second}")
        if not self.lease_seconds >= 5:
            raise ValueError(f"lease_seconds must be at least 5, got {self.lease_seconds}")

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON-ready data (what the store saves)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["windows"] = [
            {
                "days": sorted(w.days),
                "start": w.start.isoformat(),
                "end": w.end and w.end.isoformat(),
            }
            for w in self.windows
        ]
        data["retry"] = {
            "max_attempts": self.retry.max_attempts,
            "backoff": self.retry.backoff,
            "after": dict(self.retry.after),
        }
        data["dnc"] = {"numbers": sorted(self.dnc.numbers), "prefixes": sorted(self.dnc.prefixes)}
        return {"version": _JSON_VERSION, **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CampaignSpec:
        """Rebuild a spec from :meth:`to_json` data.

        Raises:
            ValueError: data of another version, or values out of range.
        """
        if data.get("version") != _JSON_VERSION:
            raise ValueError(f"campaign spec version {data.get('version')!r} is not supported")
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["windows"] = tuple(
            Window(frozenset(w["days"]), time.fromisoformat(w["start"]), _time(w["end"]))
            for w in data["windows"]
        )
        values["retry"] = RetryPolicy(**data["retry"])
        values["dnc"] = DncList(data["dnc"]["numbers"], data["dnc"]["prefixes"])
        return cls(**values)


def _time(text: str | None) -> time | None:
    return None if text is None else time.fromisoformat(text)


# ----------------------------------------------------------------------------- YAML

_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_ZONE_EXAMPLE = "an IANA time zone like America/New_York"
T = TypeVar("T")


def _describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return "nothing" if node.tag == _NULL_TAG else repr(node.value)


def _zone(text: str) -> str:
    if not zone_exists(text):
        raise ValueError(f"expected {_ZONE_EXAMPLE}, got {text!r}")
    return text


def _prefix(text: str) -> str:
    """A checked DNC prefix (``+`` then digits)."""
    return next(iter(DncList(prefixes=[text]).prefixes))


class _Reader:
    """Reads values out of composed YAML nodes, raising positioned errors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._constructor = SafeConstructor()

    def error(self, node: Node, key: str | None, message: str) -> CampaignDefinitionError:
        mark = node.start_mark
        return CampaignDefinitionError(self.path, mark.line + 1, mark.column + 1, key, message)

    def expected(self, node: Node, key: str, what: str) -> CampaignDefinitionError:
        return self.error(node, key, f"expected {what}, got {_describe(node)}")

    def mapping(self, node: Node, key: str, allowed: Iterable[str]) -> dict[str, Node]:
        """A mapping's values by key, leaving out null values (a null means the default)."""
        if not isinstance(node, MappingNode):
            raise self.expected(node, key, "a mapping of keys")
        names = list(allowed)
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            if not isinstance(key_node, ScalarNode):
                raise self.expected(key_node, key, "a plain word as the key")
            full = f"{key}.{key_node.value}" if key else str(key_node.value)
            if key_node.value in seen:
                raise self.error(key_node, full, "duplicate key")
            if key_node.value not in names:
                close = difflib.get_close_matches(str(key_node.value), names, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                message = f"unknown key ({hint}expected one of {', '.join(names)})"
                raise self.error(key_node, full, message)
            seen.add(key_node.value)
        self._constructor.flatten_mapping(node)  # resolves `<<: *anchor` merges in place
        return {str(k.value): v for k, v in node.value if v.tag != _NULL_TAG}

    def items(self, node: Node, key: str) -> list[tuple[Node, str]]:
        """A list's items with their keys (``key[0]``, ...)."""
        if not isinstance(node, SequenceNode):
            raise self.expected(node, key, "a list")
        return [(item, f"{key}[{i}]") for i, item in enumerate(node.value)]

    def text(self, node: Node, key: str, what: str, parse: Callable[[str], T]) -> T:
        """Parse a scalar's text as written (so ``20:00`` is not a YAML 1.1 integer)."""
        if not isinstance(node, ScalarNode) or not str(node.value).strip():
            raise self.expected(node, key, what)
        try:
            return parse(str(node.value).strip())
        except CampaignDefinitionError:
            raise  # already names its own file and line (a DNC file)
        except ValueError as exc:
            raise self.error(node, key, str(exc).removeprefix(f"{key}: ")) from None

    def number(self, node: Node, key: str, what: str, ok: Callable[[Any], bool]) -> Any:
        """A YAML int or float (not a bool) for which ``ok`` holds."""
        value = self._constructor.construct_object(node) if isinstance(node, ScalarNode) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or not ok(value):
            raise self.expected(node, key, what)
        return value

    def duration(self, node: Node, key: str, *, never: bool, least: float) -> float | None:
        """Seconds, or None for 'never' (when ``never``)."""
        seconds = self.text(node, key, "a duration", lambda text: parse_duration(text, key))
        if (seconds is None and not never) or (seconds is not None and seconds < least):
            rule = f"at least {least:g} seconds" + (" or never" if never else "")
            raise self.expected(node, key, f"a duration like 30s or 5m, {rule}")
        return seconds


def load_campaign(path: str | Path) -> CampaignSpec:
    """Read a campaign YAML file.

    Args:
        path: the campaign file; ``agent`` and ``dnc.file`` are relative to its folder.

    Returns:
        The campaign's spec, with defaults for the keys not given.

    Raises:
        CampaignDefinitionError: the file is missing, not YAML, or has an
            unknown key or a bad value.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        message = "file not found (expected a campaign YAML file)"
        raise CampaignDefinitionError(p, None, None, None, message) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror
        raise CampaignDefinitionError(p, None, None, None, f"cannot read: {reason}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise CampaignDefinitionError(p, line, col, None, f"invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise CampaignDefinitionError(p, None, None, None, f"invalid YAML: {exc}") from None
    if root is None:
        message = "empty file (expected campaign keys like windows or retry; {} for all defaults)"
        raise CampaignDefinitionError(p, 1, 1, None, message)
    reader = _Reader(p)
    values: dict[str, Any] = {}
    for key, node in reader.mapping(root, "", [*_FIELDS, "pacing"]).items():
        if key == "pacing":
            for name, item in reader.mapping(node, key, _PACING).items():
                values[name] = _PACING[name](reader, item, f"pacing.{name}")
        else:
            values[key] = _FIELDS[key](reader, node, key)
    return CampaignSpec(**values)


def _agent(reader: _Reader, node: Node, key: str) -> str:
    def resolve(name: str) -> str:
        resolved = (reader.path.parent / name).resolve()
        if not resolved.is_file():
            raise ValueError(f"file not found: {name!r} (expected an agent config YAML file)")
        return str(resolved)

    return reader.text(node, key, "a file path, relative to this file", resolve)


def _windows(reader: _Reader, node: Node, key: str) -> tuple[Window, ...]:
    if not isinstance(node, SequenceNode) or not node.value:
        raise reader.expected(node, key, "a list of windows {days: mon-fri, start: ..., end: ...}")
    windows = []
    for item, where in reader.items(node, key):
        fields = reader.mapping(item, where, ["days", "start", "end"])
        for name in ("days", "start", "end"):
            if name not in fields:
                raise reader.error(item, where, f"missing key {name} (expected days, start, end)")
        days_node, days_key = fields["days"], f"{where}.days"
        names: str | list[str]
        if isinstance(days_node, SequenceNode):
            items = reader.items(days_node, days_key)
            names = [reader.text(n, k, "a weekday like mon", str) for n, k in items]
        else:
            names = reader.text(days_node, days_key, "weekdays like mon-fri", str)
        try:
            days = parse_days(names)
        except ValueError as exc:
            raise reader.error(days_node, days_key, str(exc)) from None
        start = reader.text(fields["start"], f"{where}.start", "HH:MM", parse_clock)
        end = reader.text(
            fields["end"], f"{where}.end", "HH:MM", lambda t: parse_clock(t, end=True)
        )
        if start is None or (end is not None and end <= start):
            raise reader.expected(fields["end"], f"{where}.end", "a time after the start")
        windows.append(Window(days, start, end))
    return tuple(windows)


def _retry(reader: _Reader, node: Node, key: str) -> RetryPolicy:
    fields = reader.mapping(node, key, ["max_attempts", "backoff", "after"])
    after: dict[str, float | None] = dict(DEFAULT_RETRY_AFTER)
    if "after" in fields:
        for outcome, item in reader.mapping(fields["after"], f"{key}.after", OUTCOMES).items():
            after[outcome] = reader.duration(item, f"{key}.after.{outcome}", never=True, least=0)
    attempts, backoff = fields.get("max_attempts"), fields.get("backoff")
    return RetryPolicy(
        max_attempts=3 if attempts is None else _count(reader, attempts, f"{key}.max_attempts"),
        after=after,
        backoff=1.0 if backoff is None else _positive(reader, backoff, f"{key}.backoff"),
    )


def _dnc(reader: _Reader, node: Node, key: str) -> DncList:
    fields = reader.mapping(node, key, ["numbers", "prefixes", "file"])
    found: dict[str, list[str]] = {"numbers": [], "prefixes": []}
    for name, parse in (("numbers", parse_e164), ("prefixes", _prefix)):
        if name in fields:
            what = "a phone number" if name == "numbers" else "a prefix like +1900"
            items = reader.items(fields[name], f"{key}.{name}")
            found[name] = [reader.text(item, where, what, parse) for item, where in items]
    listed = DncList(found["numbers"], found["prefixes"])
    if "file" in fields:
        listed = listed | reader.text(
            fields["file"],
            f"{key}.file",
            "a file path",
            lambda name: _dnc_file(reader.path.parent / name),
        )
    return listed


def _dnc_file(path: Path) -> DncList:
    """A DNC text file: one number or prefix (``+1900*``) per line, ``#`` comments."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        raise ValueError(f"cannot read {path.name!r} (expected a text file of numbers)") from None
    numbers: list[str] = []
    prefixes: list[str] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        entry = raw.split("#", 1)[0].strip()
        try:
            if entry.endswith("*"):
                prefixes.append(_prefix(entry[:-1]))
            elif entry:
                numbers.append(parse_e164(entry))
        except ValueError as exc:
            message = f"expected a number, or a prefix ending in '*' like +1900*: {exc}"
            raise CampaignDefinitionError(path, n, None, None, message) from None
    return DncList(numbers, prefixes)


def _count(reader: _Reader, node: Node, key: str) -> int:
    return int(reader.number(node, key, "an integer >= 1", lambda v: isinstance(v, int) and v >= 1))


def _positive(reader: _Reader, node: Node, key: str) -> float:
    return float(reader.number(node, key, "a number above 0", lambda v: v > 0))


_Field = Callable[[_Reader, Node, str], Any]
_FIELDS: dict[str, _Field] = {
    "agent": _agent,
    "caller_id": lambda reader, node, key: reader.text(node, key, "a phone number", parse_e164),
    "timezone": lambda reader, node, key: reader.text(node, key, _ZONE_EXAMPLE, _zone),
    "windows": _windows,
    "retry": _retry,
    "dnc": _dnc,
    "priority": lambda reader, node, key: reader.number(
        node, key, "an integer", lambda v: isinstance(v, int)
    ),
    "lease_seconds": lambda reader, node, key: reader.duration(node, key, never=False, least=5),
    "max_call_seconds": lambda reader, node, key: reader.duration(node, key, never=True, least=1),
}
_PACING: dict[str, _Field] = {"max_concurrent": _count, "max_per_second": _positive}


# ----------------------------------------------------------------------------- CSV

_NUMBER_COLUMNS = ("number", "phone", "phone_number")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Contact:
    """One person to call.

    Attributes:
        line: 1-based line of the contact's row in the CSV file.
        number: canonical E.164 (kept out of the repr).
        zones: the callee's IANA time zones; calls go out only when every one
            is inside a calling window.
        priority: higher is dialled first.
        variables: the row's other columns (non-empty values), for the agent's prompt.
    """

    line: int
    number: str = field(repr=False)
    zones: tuple[str, ...]
    priority: int
    variables: dict[str, str]


@dataclass
class ContactsFile:
    """The contacts of a CSV file and what was noticed while reading it.

    Attributes:
        contacts: the contacts in file order, duplicates merged.
        warnings: one line each, ``FILE:LINE: ...``, without phone numbers.
    """

    contacts: list[Contact]
    warnings: list[str]


def load_contacts(
    path: str | Path, *, default_timezone: str | None = None, default_priority: int = 0
) -> ContactsFile:
    """Read a contacts CSV: a header row with a ``number`` column, then one contact per line.

    Args:
        path: the CSV file (UTF-8, a BOM is fine).
        default_timezone: zone for numbers whose zone cannot be told otherwise.
        default_priority: priority of rows without a ``priority`` value.

    Returns:
        The contacts; rows repeating a number are merged into the first one.

    Raises:
        CampaignDefinitionError: the file is missing, has no ``number`` column
            or no contacts, or a row has a bad value.
        ValueError: ``default_timezone`` is not a known zone.
    """
    p = Path(path)
    if default_timezone is not None and not zone_exists(default_timezone):
        raise ValueError(f"default_timezone: expected {_ZONE_EXAMPLE}, got {default_timezone!r}")
    rows = _csv_rows(p)
    header_line, header = rows[0]
    roles = _header(p, header_line, header)
    if len(rows) == 1:
        message = "no contacts (expected one contact per line after the header)"
        raise CampaignDefinitionError(p, header_line, None, None, message)
    by_number: dict[str, Contact] = {}
    warnings: list[str] = []
    for line, row in rows[1:]:
        if len(row) != len(header):
            message = f"expected {len(header)} fields like the header, got {len(row)}"
            raise CampaignDefinitionError(p, line, None, None, message)
        found = _contact(p, line, zip(roles, header, row, strict=True), default_priority)
        if not found.zones and default_timezone is not None:
            found = replace(found, zones=(default_timezone,))
        if not found.zones:
            message = (
                "cannot tell the callee's time zone from the number; "
                "add a timezone column or set timezone in the campaign"
            )
            raise CampaignDefinitionError(p, line, roles.index("number") + 1, "number", message)
        kept = by_number.get(found.number)
        if kept is None:
            by_number[found.number] = found
            continue
        by_number[found.number] = replace(
            kept,
            priority=max(kept.priority, found.priority),
            variables={**found.variables, **kept.variables},
        )
        warnings.append(f"{p}:{line}: repeats the number of line {kept.line}; merged")
    return ContactsFile(list(by_number.values()), warnings)


def _contact(
    path: Path, line: int, cells: Iterable[tuple[str, str, str]], priority: int
) -> Contact:
    """One row's contact; its zones are the row's timezone, else the number's (maybe none)."""
    number, zone = "", ""
    variables: dict[str, str] = {}
    for col, (role, name, raw) in enumerate(cells, start=1):
        value = raw.strip()
        try:
            if role == "number":
                number = parse_e164(value)
            elif role == "timezone" and value and not zone_exists(value):
                raise ValueError(f"expected {_ZONE_EXAMPLE}, got {value!r}")
            elif role == "timezone":
                zone = value
            elif role == "priority" and value:
                if not re.fullmatch(r"[+-]?\d+", value):
                    raise ValueError(f"expected an integer, got {value!r}")
                priority = int(value)
            elif role != "priority" and value:
                variables[role] = value
        except ValueError as exc:
            raise CampaignDefinitionError(path, line, col, name.strip(), str(exc)) from None
    zones = (zone,) if zone else zones_for_number(number)
    return Contact(line, number, zones, priority, variables)


def _csv_rows(path: Path) -> list[tuple[int, list[str]]]:
    """The non-blank rows of a CSV file, each with the line it starts on."""

    def fail(line: int | None, message: str) -> CampaignDefinitionError:
        return CampaignDefinitionError(path, line, None, None, message)

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise fail(None, "file not found (expected a contacts CSV file)") from None
    except OSError as exc:
        raise fail(None, f"cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise fail(line, "not UTF-8 text (save the CSV as UTF-8)") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, list[str]]] = []
    previous = 0
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                rows.append((previous + 1, row))
            previous = reader.line_num
    except csv.Error as exc:
        raise fail(reader.line_num, f"bad CSV: {exc}") from None
    if not rows:
        raise fail(None, "empty file (expected a header row with a number column)")
    return rows


def _header(path: Path, line: int, header: list[str]) -> list[str]:
    """Each column's role: ``number``, ``timezone``, ``priority`` or a variable name."""
    roles: list[str] = []
    for col, raw in enumerate(header, start=1):
        name = raw.strip()
        role = "number" if name.lower() in _NUMBER_COLUMNS else name
        role = role.lower() if role.lower() in ("timezone", "priority") else role
        if not _IDENTIFIER.fullmatch(name):
            message = f"expected a column name of letters, digits and underscores, got {name!r}"
            raise CampaignDefinitionError(path, line, col, None, message)
        if role.lower() in (r.lower() for r in roles):
            first = [r.lower() for r in roles].index(role.lower()) + 1
            message = f"duplicate column (the same as column {first})"
            raise CampaignDefinitionError(path, line, col, name, message)
        roles.append(role)
    if "number" not in roles:
        names = ", ".join(_NUMBER_COLUMNS)
        message = f"expected a number column (named one of {names}), got {', '.join(header)}"
        raise CampaignDefinitionError(path, line, None, None, message)
    return roles
