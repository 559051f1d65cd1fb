"""Validators, text helpers and pack-file reading for the ``rules`` decision backend.

A validator takes the text a pattern matched (its ``value`` group when the pattern
has one) and returns whether it really is what the pattern looks for: a card number
that passes the Luhn check, an SSN outside the never-issued ranges, an IBAN whose
check digits are right. They are pure functions over short strings.

:data:`VALIDATORS` maps the names pack files use (``validate: luhn``) to them.

The second half reads pack files into :class:`Spec` objects, checks them (every
problem is a one-line :class:`PackError` naming the file, the key and what was
expected) and merges extensions; :mod:`guardrails.rules` compiles them. The format is described
in :mod:`guardrails.rules`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

__all__ = [
    "VALIDATORS",
    "PackError",
    "Spec",
    "merge_specs",
    "read_spec",
    "card",
    "iban",
    "luhn",
    "national_id",
    "nino",
    "secret",
    "sin",
    "spell_digits",
    "ssn",
]

_NOT_DIGIT = re.compile(r"\D+")
_GROUP_SPLIT = re.compile(r"[\s.,-]+")


def _digits(text: str) -> str:
    return _NOT_DIGIT.sub("", text)


def luhn(text: str) -> bool:
    """Whether the digits of ``text`` pass the Luhn (mod 10) check.

    Args:
        text: Digits, possibly with separators; anything but digits is ignored.

    Returns:
        True for at least two digits whose Luhn sum is a multiple of ten.
    """
    digits = _digits(text)
    if len(digits) < 2:
        return False
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def card(text: str) -> bool:
    """Whether ``text`` holds a payment card number: 13-19 digits passing Luhn.

    A run of digit groups may carry a few extra digits around the number ("4111
    1111 1111 1111 12 27" with an expiry date after it), so when the whole run has
    the wrong length, sub-runs that drop whole groups, at most four digits in all,
    from either end are tried too, as long as every group they keep has at least
    three digits (spelled-out numbers, one digit per group, must fit exactly).

    Args:
        text: The matched digits with spaces or dashes between groups.

    Returns:
        True when the number, or such a sub-run, is a valid card number.
    """
    digits = _digits(text)
    if 13 <= len(digits) <= 19:
        return luhn(digits)
    groups = [g for g in _GROUP_SPLIT.split(text.strip()) if g]
    for start in range(len(groups)):
        size = 0
        for end in range(start, len(groups)):
            if len(groups[end]) < 3:
                break
            size += len(groups[end])
            if size > 19:
                break
            if size >= 13 and len(digits) - size <= 4 and luhn("".join(groups[start : end + 1])):
                return True
    return False


def ssn(text: str) -> bool:
    """Whether ``text`` is a US Social Security number that could have been issued.

    Area 000, 666 and 900-999, group 00 and serial 0000 are never issued.

    Args:
        text: Nine digits, possibly with separators.

    Returns:
        True for nine digits outside the invalid ranges.
    """
    digits = _digits(text)
    if len(digits) != 9:
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9":
        return False
    return group != "00" and serial != "0000"


def sin(text: str) -> bool:
    """Whether ``text`` is a Canadian Social Insurance Number (nine digits, Luhn).

    Args:
        text: Nine digits, possibly with separators.

    Returns:
        True for nine digits that pass the Luhn check and do not start with 8.
    """
    digits = _digits(text)
    return len(digits) == 9 and digits[0] != "8" and luhn(digits)


_NINO = re.compile(r"([A-Z]{2})(\d{6})([A-D])")
_NINO_BAD_FIRST = frozenset("DFIQUV")
_NINO_BAD_SECOND = frozenset("DFIOQUV")
_NINO_BAD_PREFIX = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def nino(text: str) -> bool:
    """Whether ``text`` is a UK National Insurance number ("AB 12 34 56 C").

    Args:
        text: Two letters, six digits and a suffix letter A-D; spaces, dots and dashes
            between them are allowed ("PR-47-10-93-B").

    Returns:
        True when the prefix letters are ones HMRC allocates.
    """
    compact = re.sub(r"[\s.-]+", "", text).upper()
    found = _NINO.fullmatch(compact)
    if found is None:
        return False
    prefix = found.group(1)
    return (
        prefix[0] not in _NINO_BAD_FIRST
        and prefix[1] not in _NINO_BAD_SECOND
        and prefix not in _NINO_BAD_PREFIX
    )


#: IBAN lengths of the countries most likely to be read out; others accept 15-34.
_IBAN_LENGTHS = {
    "AT": 20, "BE": 16, "CH": 21, "CZ": 24, "DE": 22, "DK": 18, "ES": 24, "FI": 18,
    "FR": 27, "GB": 22, "GR": 27, "HU": 28, "IE": 22, "IT": 27, "LU": 20, "NL": 18,
    "NO": 15, "PL": 28, "PT": 25, "RO": 24, "SE": 24, "SK": 24,
}  # fmt: skip


def _mod97(candidate: str) -> bool:
    rearranged = candidate[4:] + candidate[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def iban(text: str) -> bool:
    """Whether ``text`` starts with an IBAN whose check digits are right (mod 97).

    The match may run on into following words ("... 7654 32 looks wrong"), so the
    IBAN is cut at its country's length, or for other countries at a group end.

    Args:
        text: Country code, check digits and account groups, spaces allowed.

    Returns:
        True when an IBAN at the start of ``text`` passes the mod-97 check.
    """
    groups = text.upper().split()
    compact = "".join(groups)
    if len(compact) < 15 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    length = _IBAN_LENGTHS.get(compact[:2])
    if length is not None:
        candidate = compact[:length]
        return len(candidate) == length and candidate.isalnum() and _mod97(candidate)
    size = 0
    for group in groups:
        size += len(group)
        candidate = compact[:size]
        if 15 <= size <= 34 and candidate.isalnum() and _mod97(candidate):
            return True
    return False


_SECRET_STOPWORDS = frozenset(
    """
    a an the your my our their his her its this that these those it yours mine one
    not no now still also only just too very so same different already currently
    being been be is are was were will can must should would could may might
    required needed necessary optional incorrect correct wrong right invalid valid
    expired expiring reset changed updated sent saved stored set locked unlocked
    case sensitive strong weak long short secure safe private confidential hidden
    protected encrypted missing blank empty ready available visible shown listed
    displayed active inactive good fine important simple complex easy hard similar
    something anything nothing what which whatever how why where when there here
    on in at for to of by with from about as and or but if then than last first
    due never always usually unique personal tied linked known new old temporary
    asterisks characters digits letters numbers case-sensitive
    """.split()
)
_TRAILING = ".,;:?\"')]"


def secret(text: str) -> bool:
    """Whether ``text`` looks like a disclosed secret value rather than ordinary words.

    Used after "your password is ...": "hunter2" or "Tr0ub4dor&3" pass, while
    "the", "incorrect", "expiring", "case-sensitive" or "8" (characters) do not.

    Args:
        text: The word that followed the disclosure phrase.

    Returns:
        True when the word can be a password or answer.
    """
    value = text.strip().strip(_TRAILING).lower()
    bare = value.rstrip("!")
    parts = [p for p in re.split(r"[-_]", bare) if p]
    if not parts or bare in _SECRET_STOPWORDS or parts[0] in _SECRET_STOPWORDS:
        return False
    if bare.isdigit():
        return len(bare) >= 3
    if bare.isalpha() and (bare.endswith(("ing", "ly")) or len(bare) < 3):
        return False
    return not (bare.isalpha() and bare.endswith("ed") and len(bare) > 4)


def national_id(text: str) -> bool:
    """Whether ``text`` looks like an identity number read out after its name.

    Used after "your passport number is ...", "your Aadhaar number is ...": the value
    must hold at least six digits, or five with letters ("8321459KA", a UK driving
    licence "SMITH712094JB9AA"), and be at most 24 characters without separators.

    Args:
        text: The matched groups of letters and digits.

    Returns:
        True for a plausible identity number.
    """
    compact = re.sub(r"[\s-]+", "", text)
    digits = sum(c.isdigit() for c in compact)
    if len(compact) > 24 or not compact.isalnum():
        return False
    return digits >= 6 or (digits >= 5 and digits < len(compact))


VALIDATORS: dict[str, Callable[[str], bool]] = {
    "card": card,
    "iban": iban,
    "luhn": luhn,
    "national_id": national_id,
    "nino": nino,
    "secret": secret,
    "sin": sin,
    "ssn": ssn,
}

_DIGIT_WORDS = {
    "zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
_WORD = r"(?:zero|oh|o|one|two|three|four|five|six|seven|eight|nine|double|triple)"
_RUN = re.compile(rf"\b{_WORD}(?:[ ,-]+{_WORD})+\b")


def _convert_run(found: re.Match[str]) -> str:
    tokens = [t for t in re.split(r"[ ,-]+", found.group(0)) if t]
    digits: list[str] = []
    repeat = 1
    for token in tokens:
        if token in ("double", "triple"):
            if repeat != 1:
                return found.group(0)
            repeat = 2 if token == "double" else 3
            continue
        digits.extend([_DIGIT_WORDS[token]] * repeat)
        repeat = 1
    if repeat != 1 or len(digits) < 4:
        return found.group(0)
    return " ".join(digits)


def spell_digits(text: str) -> str:
    """Replace runs of four or more spoken digits with digits separated by spaces.

    "four one one one" becomes "4 1 1 1"; "double five" counts as two fives. Shorter
    runs ("one or two") stay words, so ordinary speech is not turned into numbers.

    Args:
        text: Lowercase text.

    Returns:
        The text with long spoken digit runs replaced.
    """
    return _RUN.sub(_convert_run, text)


# --- pack files: reading, checking, merging and compiling -------------------------------


class PackError(ValueError):
    """A pack file is invalid; the message names the file, the key and what was expected."""


def _fail(source: str, key: str, expected: str) -> NoReturn:
    raise PackError(f"{source}: {key}: expected {expected}".replace("\n", " "))


@dataclass
class SpecItem:
    """One pattern, list or exception as read from a file (not yet compiled)."""

    source: str
    key: str
    id: str
    weight: float = 0.0
    regex: list[str] | None = None
    words: list[str] | None = None
    validate: str | None = None
    suppresses: list[str] | None = None
    whole_text: bool = False


@dataclass
class Spec:
    """A pack as read from one file, or several files merged."""

    source: str
    name: str
    description: str | None = None
    normalize: str | None = None
    floor: float | None = None
    replace: bool = False
    defines: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    vocab: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    rules: list[SpecItem] = field(default_factory=list)
    exceptions: list[SpecItem] = field(default_factory=list)
    typos: list[tuple[str, str, str]] = field(default_factory=list)


_TOP_KEYS: tuple[str, ...] = ("name", "description", "normalize", "floor", "replace")
_TOP_KEYS += ("define", "vocab", "patterns", "lists", "exceptions", "typos")
_ITEM_KEYS = {
    "patterns": ("id", "weight", "regex", "validate"),
    "lists": ("id", "weight", "words"),
    "exceptions": ("id", "regex", "words", "suppresses", "scope"),
}
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
_MACRO_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def _check_keys(source: str, key: str, data: dict[Any, Any], allowed: tuple[str, ...]) -> None:
    for name in data:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            _fail(source, where, f"one of {', '.join(allowed)} (unknown key)")


def _string(source: str, key: str, value: Any, *, pattern: re.Pattern[str] | None = None) -> str:
    if isinstance(value, bool | int | float):
        _fail(source, key, "a string (quote words YAML reads as other types: 'yes', 'on', '12')")
    if not isinstance(value, str) or not value.strip():
        _fail(source, key, "a non-empty string")
    if pattern is not None and not pattern.fullmatch(value):
        _fail(source, key, f"a name matching {pattern.pattern}")
    return value


def _strings(source: str, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [_string(source, key, value)]
    if not isinstance(value, list) or not value:
        _fail(source, key, "a string or a non-empty list of strings")
    return [_string(source, f"{key}[{i}]", v) for i, v in enumerate(value)]


def _number(source: str, key: str, value: Any, low: float, high: float, text: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not (low < value <= high if text.startswith("(") else low <= value < high):
        _fail(source, key, f"a number in {text}")
    return float(value)


def _item(source: str, section: str, index: int, data: Any) -> SpecItem:
    key = f"{section}[{index}]"
    if not isinstance(data, dict):
        _fail(source, key, "a mapping")
    _check_keys(source, key, data, _ITEM_KEYS[section])
    item = SpecItem(source, key, _string(source, f"{key}.id", data.get("id"), pattern=_NAME))
    if section != "exceptions":
        item.weight = _number(source, f"{key}.weight", data.get("weight"), 0, 1, "(0, 1]")
    has_regex, has_words = "regex" in data, "words" in data
    if section == "patterns" or (section == "exceptions" and not has_words):
        item.regex = _strings(source, f"{key}.regex", data.get("regex"))
    if section == "lists" or (section == "exceptions" and has_words):
        if has_regex:
            _fail(source, f"{key}.words", "either regex or words, not both")
        item.words = _strings(source, f"{key}.words", data.get("words"))
    if data.get("validate") is not None:
        name = data["validate"]
        if name not in VALIDATORS:
            _fail(source, f"{key}.validate", f"one of {', '.join(sorted(VALIDATORS))}")
        item.validate = name
    if data.get("suppresses") is not None:
        item.suppresses = _strings(source, f"{key}.suppresses", data["suppresses"])
    scope = data.get("scope", "match")
    if scope not in ("match", "text"):
        _fail(source, f"{key}.scope", "match or text")
    item.whole_text = scope == "text"
    return item


def read_spec(path: str | Path) -> Spec:
    """Read and check one pack file (regexes are checked when compiled).

    Args:
        path: The YAML file.

    Returns:
        Its spec.

    Raises:
        PackError: The file is unreadable, not YAML, or breaks the format.
    """
    source = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        _fail(source, "file", f"a readable file ({error.strerror})")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or "unparsable"
        _fail(source, "yaml", f"valid YAML ({where}{problem})")
    if not isinstance(data, dict):
        _fail(source, "file", "a mapping with name and patterns")
    _check_keys(source, "", data, _TOP_KEYS)
    spec = Spec(source, _string(source, "name", data.get("name"), pattern=_NAME))
    if data.get("description") is not None:
        spec.description = _string(source, "description", data["description"])
    if data.get("normalize") is not None:
        if data["normalize"] not in ("words", "text"):
            _fail(source, "normalize", "words or text")
        spec.normalize = data["normalize"]
    if data.get("floor") is not None:
        spec.floor = _number(source, "floor", data["floor"], 0, 1, "[0, 1)")
    replace = data.get("replace", False)
    if not isinstance(replace, bool):
        _fail(source, "replace", "true or false")
    spec.replace = replace
    for section in ("define", "vocab"):
        entries = data.get(section) or {}
        if not isinstance(entries, dict):
            _fail(source, section, "a mapping of names")
        for name, value in entries.items():
            key = f"{section}.{name}"
            if not isinstance(name, str) or not _MACRO_NAME.fullmatch(name) or name == "w":
                _fail(source, key, "a lowercase name other than w")
            if section == "define":
                spec.defines[name] = (source, key, _string(source, key, value))
            else:
                words = _strings(source, key, value)
                spec.vocab[name] = [(source, f"{key}[{i}]", w) for i, w in enumerate(words)]
    typos = data.get("typos") or []
    if not isinstance(typos, list) or not all(isinstance(t, str) for t in typos):
        _fail(source, "typos", "a list of vocab names")
    spec.typos = [(source, f"typos[{i}]", name) for i, name in enumerate(typos)]
    seen: set[str] = set()
    for section in ("patterns", "lists", "exceptions"):
        entries = data.get(section) or []
        if not isinstance(entries, list):
            _fail(source, section, "a list")
        for index, entry in enumerate(entries):
            item = _item(source, section, index, entry)
            if item.id in seen:
                _fail(source, f"{item.key}.id", f"a unique id ({item.id!r} is used twice)")
            seen.add(item.id)
            (spec.exceptions if section == "exceptions" else spec.rules).append(item)
    return spec


def _merge_items(base: list[SpecItem], extra: list[SpecItem]) -> list[SpecItem]:
    replaced = {item.id: item for item in extra}
    merged = [replaced.pop(item.id, item) for item in base]
    return merged + [item for item in extra if item.id in replaced]


def merge_specs(base: Spec, extra: Spec) -> Spec:
    """Extend ``base`` with an extension file's spec.

    Args:
        base: The loaded pack.
        extra: A file with the same name and ``replace: false``.

    Returns:
        The merged spec (neither argument is changed).

    Raises:
        PackError: The extension sets a different ``normalize``.
    """
    mode = base.normalize or "words"
    if extra.normalize is not None and extra.normalize != mode:
        _fail(extra.source, "normalize", f"{mode} like the pack it extends, or nothing")
    vocab = {name: list(words) for name, words in base.vocab.items()}
    for name, words in extra.vocab.items():
        vocab.setdefault(name, []).extend(words)
    return Spec(
        source=base.source,
        name=base.name,
        description=extra.description if extra.description is not None else base.description,
        normalize=base.normalize,
        floor=extra.floor if extra.floor is not None else base.floor,
        defines={**base.defines, **extra.defines},
        vocab=vocab,
        rules=_merge_items(base.rules, extra.rules),
        exceptions=_merge_items(base.exceptions, extra.exceptions),
        typos=[*base.typos, *extra.typos],
    )
