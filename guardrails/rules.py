"""The ``rules`` decision backend: fast, offline pattern and lexicon checks.

:class:`RulesDecisionModel` is a livekit ``llm.DecisionModel`` that answers
``llm.Probability`` decisions. The decision's *name* selects a rule pack (its
prompt is ignored): ``abusive``, ``human_handoff``, ``prompt_injection`` and
``sensitive_data`` are built in (``guardrails/packs/``); users add or extend packs
with directories of YAML files. Input is the text to check or a livekit
``role: text`` transcript, of which only the last line is scored.

Pack file format (one pack per ``*.yaml``/``*.yml`` file)::

    name: human_handoff        # required; the decision name it answers
    description: ...           # optional text
    normalize: words           # optional: words (default) or text, see below
    floor: 0.02                # optional: probability when nothing matches, in [0, 1)
    replace: false             # optional: a file naming a pack that already exists
                               # extends it, or replaces it when true
    define:                    # optional named regex fragments, used as {name}
      person: '(?:a |the )?(?:human|person)'
    vocab:                     # optional named word/phrase lists, used as {name}
      insult: [idiot*, piece of crap, 'no']   # quote words YAML reads as bool/number
    patterns:                  # weighted regular expressions
      - id: ask_person         # unique in the pack
        weight: 0.85           # in (0, 1]
        regex: 'talk to {person}'   # a string, or a list of alternatives
        validate: luhn         # optional validator the match must pass
    lists:                     # weighted word/phrase lists, matched as whole words
      - id: slur
        weight: 0.9
        words: [word, two words, prefix*]
    exceptions:                # matches that suppress pattern and list matches
      - id: negated
        regex: "(?:don't|no) need"  # or words: [...]
        suppresses: [ask_person]    # optional; default every pattern and list
        scope: match           # match (default): only overlapping matches; text: all
                               # (a lookahead such as '^(?!.*\\byou\\b)' with scope
                               # text suppresses when a word is absent)

Normalisation. ``words`` first undoes obfuscated spellings (look-alike letters,
leetspeak inside words, stretched letters, marks inside words, spaced-out letters:
:func:`guardrails.normalize.deobfuscate`), then lowercases the text, drops apostrophes ("don't" is
``dont``), turns every other character that is not a letter or digit into a space,
removes filler words (um, uh, er, hmm) and leaves single spaces; pattern sources
lose their apostrophes too, so write ``don't`` or ``dont``. ``text`` lowercases,
unifies quotes, removes fillers, turns runs of four or more spoken digits into
digits ("four one one one" is ``4 1 1 1``) and collapses whitespace, keeping
punctuation. Write one space between words. Regexes use Python syntax; the text
is lowercase and so are pattern letters outside escapes (``\\d``, ``\\S`` keep their
meaning), which makes matching case-insensitive. A list of alternatives is joined
with ``|``.

Typos. ``typos: [vocab names]`` makes the pack read a word one slip away from a
single word of those lists (two letters swapped, one left out or one added; words of
five letters or more, four for a swap) as that word ("haet" is ``hate``, "womn" is
``women``), unless the slip is itself a common word (``guardrails/data/known_words.txt``).

Macros. ``{name}`` expands a ``define`` (a regex) or a ``vocab`` list (alternatives
bounded as whole words; a trailing ``*`` allows any word ending, ``idiot*``).
``{w}`` is one word and ``{w:0-2}`` zero to two words, each followed by a space
(``you {w:0-2}{insult}``). Quantifiers such as ``{2,3}`` are unaffected.

Validators. With ``validate``, the pattern's ``(?P<value>...)`` group (in any of
its alternatives), or else the whole match, must pass: ``card`` (13-19 digits,
Luhn), ``luhn``, ``ssn``, ``sin``, ``nino``, ``iban``, ``national_id`` (an identity
number: six or more digits, or five with letters) or ``secret`` (see
:mod:`guardrails.rule_validators`).

Scoring. Each pattern or list counts once, with its first match (at any start
position) that passes its validator and is not suppressed. The probability is
``1 - prod(1 - weight)`` over the matched ids, or ``floor`` when none match. The ids
go to ``ProbabilityResult.provider_data["matched"]``; the text is never copied.

Extending. A file whose name is already loaded adds its defines (same name:
replaced), vocab words (appended), patterns, lists and exceptions (same id:
replaced) to that pack; ``description`` and ``floor`` replace the pack's when
given, ``normalize`` must not differ. With ``replace: true`` the file is a new pack
under that name.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from .normalize import correct_typos, deobfuscate, typo_map
from .regex_cache import RegexStore
from .rule_validators import (
    VALIDATORS,
    PackError,
    Spec,
    SpecItem,
    merge_specs,
    read_spec,
    spell_digits,
)

__all__ = [
    "BUILTIN_PACK_DIR",
    "DEFAULT_FLOOR",
    "PackError",
    "Rule",
    "RulePack",
    "RulesDecisionModel",
    "PackScorer",
    "Suppressor",
    "builtin_pack_names",
    "evaluate_packs",
    "load_pack",
    "load_packs",
    "rules_score",
]

#: The directory of the built-in packs.
BUILTIN_PACK_DIR: Path = Path(__file__).with_name("packs")
#: The probability a pack gives when none of its patterns match.
DEFAULT_FLOOR = 0.02


@dataclass(frozen=True)
class Rule:
    """One compiled pattern or word list: ``id``, ``weight``, ``regex`` (over normalised
    text) and the ``validator`` its ``value`` group (or whole match) must pass, if any."""

    id: str
    weight: float
    regex: re.Pattern[str]
    validator: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class Suppressor:
    """One compiled exception: its ``regex`` suppresses matches of the rule ids in
    ``suppresses`` (None: all) that it overlaps, or anywhere when ``whole_text``."""

    id: str
    regex: re.Pattern[str]
    suppresses: frozenset[str] | None = None
    whole_text: bool = False


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u201c": '"'})
_FILLERS = re.compile(r"\b(?:u+m+|u+h+m*|e+rm*|a+h+|h+m+|m+h*m+)\b")
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def _words(text: str) -> str:
    lowered = deobfuscate(text.translate(_QUOTES)).lower().replace("'", "")
    return " ".join(_FILLERS.sub(" ", _NOT_WORD.sub(" ", lowered)).split())


def _text(text: str) -> str:
    lowered = text.lower().translate(_QUOTES).replace("\u201d", '"')
    return " ".join(spell_digits(_FILLERS.sub(" ", lowered)).split())


_NORMALIZERS: dict[str, Callable[[str], str]] = {"words": _words, "text": _text}


@dataclass(frozen=True)
class RulePack:
    """A compiled rule pack: the answer to one probability decision.

    Attributes:
        name: The decision name it answers.
        description: What it detects.
        normalize: ``words`` or ``text``.
        floor: The probability when nothing matches.
        rules: Compiled patterns and lists, in file order.
        suppressors: Compiled exceptions.
        spec: The checked source the pack was compiled from (extensions merge into it).
    """

    name: str
    description: str
    normalize: str = "words"
    floor: float = DEFAULT_FLOOR
    rules: tuple[Rule, ...] = ()
    suppressors: tuple[Suppressor, ...] = ()
    spec: Spec | None = field(default=None, repr=False, compare=False)
    typos: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def _normalized(self, text: str) -> str:
        norm = _NORMALIZERS[self.normalize](text)
        return correct_typos(norm, self.typos) if self.typos else norm

    def score(self, text: str) -> tuple[float, tuple[str, ...]]:
        """Score ``text`` against the pack.

        Args:
            text: The text to check (not a transcript).

        Returns:
            The probability, ``1 - prod(1 - weight)`` over the matched rules or the
            floor, and the matched rule ids in pack order.
        """
        norm = self._normalized(text)
        matched: list[str] = []
        remaining = 1.0
        spans: dict[int, list[tuple[int, int]]] = {}  # suppressor matches, found on demand
        for rule in self.rules:
            found = rule.regex.search(norm)
            while found is not None:
                if rule.validator is None or rule.validator(_value(found)):
                    if not _suppressed(rule.id, found.span(), self.suppressors, norm, spans):
                        break
                # a rejected match: look for one starting at the next position
                found = rule.regex.search(norm, found.start() + 1)
            if found is not None:
                matched.append(rule.id)
                remaining *= 1.0 - rule.weight
        if not matched:
            return self.floor, ()
        return min(1.0, max(self.floor, 1.0 - remaining)), tuple(matched)

    def exception_holds(self, text: str, ids: frozenset[str]) -> bool:
        """Whether any of the exceptions named ``ids`` matches ``text`` anywhere.

        Args:
            text: The text to check (not a transcript).
            ids: Exception ids of this pack (unknown ids are ignored).

        Returns:
            True when one of them matches.
        """
        wanted = [s for s in self.suppressors if s.id in ids]
        if not wanted:
            return False
        norm = self._normalized(text)
        return any(s.regex.search(norm) is not None for s in wanted)


def _value(found: re.Match[str]) -> str:
    for name, value in found.groupdict().items():
        if value is not None and name.startswith("value"):
            return value
    return found.group(0)


def _suppressed(
    rule_id: str,
    span: tuple[int, int],
    suppressors: tuple[Suppressor, ...],
    norm: str,
    spans: dict[int, list[tuple[int, int]]],
) -> bool:
    """Whether an exception aimed at ``rule_id`` covers ``span`` (or the whole text).

    Each exception's matches are found once per text, and only when a match of a rule
    it targets needs them (``spans`` caches them by index).
    """
    start, end = span
    for index, suppressor in enumerate(suppressors):
        targets = suppressor.suppresses
        if targets is not None and rule_id not in targets:
            continue
        found = spans.get(index)
        if found is None:
            found = spans[index] = [m.span() for m in suppressor.regex.finditer(norm)]
        if not found:
            continue
        if suppressor.whole_text:
            return True
        if any(a < end and start < b for a, b in found):
            return True
    return False


_NOT_WORD_CHARS = re.compile(r"[^a-z0-9*]+")


def _fail(source: str, key: str, expected: str) -> NoReturn:
    raise PackError(f"{source}: {key}: expected {expected}".replace("\n", " "))


_ESCAPE_OR_UPPER = re.compile(r"\\.|\(\?P|[A-Z]+", re.DOTALL)


def _lower_regex(regex: str) -> str:
    """Lowercase a regex's letters except escapes (the text is lowercase; no IGNORECASE)."""
    return _ESCAPE_OR_UPPER.sub(
        lambda m: m.group(0) if m.group(0)[0] in "\\(" else m[0].lower(), regex
    )


_MACRO = re.compile(r"\{(?:(w)(?::(\d+)(?:-(\d+))?)?|([a-z_][a-z0-9_]*))\}")


class _Compiler:
    """Expands macros and compiles one spec's expressions."""

    def __init__(self, spec: Spec, store: RegexStore | None = None) -> None:
        self.spec = spec
        self.store = store or RegexStore(None)
        self.words_mode = (spec.normalize or "words") == "words"
        self.word = "[a-z0-9]+" if self.words_mode else r"\S+"
        self.edge = "a-z0-9" if self.words_mode else r"\w"
        self.done: dict[str, str] = {}
        self.active: list[str] = []

    def phrase(self, source: str, key: str, text: str) -> tuple[str, bool]:
        star = text.rstrip().endswith("*")
        body = text.rstrip().rstrip("*").lower()
        if self.words_mode:
            body = _NOT_WORD_CHARS.sub(" ", body.replace("'", ""))
        if not body.split():
            _fail(source, key, "a word or phrase with letters or digits")
        return " ".join(body.split()), star

    def alternatives(self, words: list[tuple[str, str, str]]) -> str:
        trie: dict[str, Any] = {}
        for text, star in sorted({self.phrase(*w) for w in words}):
            node = trie
            for char in text:
                node = node.setdefault(char, {})
            node["**" if star else ""] = {}
        return rf"(?<![{self.edge}])(?:{self._emit(trie)})(?![{self.edge}])"

    def _emit(self, node: dict[str, Any]) -> str:
        """A regex for a character trie: shared prefixes are matched once."""
        branches = [re.escape(c) + self._emit(child) for c, child in node.items() if len(c) == 1]
        if "**" in node:
            branches.append(f"[{self.edge}]*")
        body = "|".join(branches)
        if len(branches) > 1 or (branches and "" in node):
            body = f"(?:{body})" + ("?" if "" in node else "")
        return body

    def macro(self, source: str, key: str, name: str) -> str:
        if name in self.done:
            return self.done[name]
        if name in self.active:
            _fail(source, key, f"no circular references ({name!r} refers to itself)")
        if name in self.spec.defines:
            self.active.append(name)
            src, dkey, regex = self.spec.defines[name]
            self.done[name] = f"(?:{self.expand(src, dkey, regex)})"
            self.active.pop()
        elif name in self.spec.vocab:
            self.done[name] = self.alternatives(self.spec.vocab[name])
        else:
            _fail(source, key, f"a known define or vocab name (unknown {{{name}}})")
        return self.done[name]

    def expand(self, source: str, key: str, regex: str) -> str:
        regex = _lower_regex(regex)
        if self.words_mode:
            regex = regex.replace("'", "")

        def one(found: re.Match[str]) -> str:
            if found.group(1) is None:
                return self.macro(source, key, found.group(4))
            if found.group(2) is None:
                return self.word
            low, high = found.group(2), found.group(3) or found.group(2)
            return f"(?:{self.word} ){{{low},{high}}}"

        return _MACRO.sub(one, regex)

    def compile(self, item: SpecItem) -> re.Pattern[str]:
        if item.words is not None:
            key = f"{item.key}.words"
            words = [(item.source, f"{key}[{i}]", w) for i, w in enumerate(item.words)]
            return self.store.compile(self.alternatives(words))
        assert item.regex is not None
        parts: list[tuple[str, str]] = []
        for index, regex in enumerate(item.regex):
            key = f"{item.key}.regex" + (f"[{index}]" if len(item.regex) > 1 else "")
            expanded = self.expand(item.source, key, regex)
            if index:  # alternatives are joined: keep their value groups apart
                expanded = expanded.replace("(?P<value>", f"(?P<value_{index}>")
            parts.append((key, expanded))
        joined = "|".join(f"(?:{p})" for _, p in parts) if len(parts) > 1 else parts[0][1]
        try:
            # one compile of the whole item: the packs' regexes are large, and compiling
            # each part first as well doubled the start-up of every process
            return self.store.compile(joined)
        except re.error as error:
            for key, part in parts:  # name the part at fault
                try:
                    re.compile(part)
                except re.error as part_error:
                    _fail(item.source, key, f"a valid regular expression ({part_error})")
            # e.g. the same group name in two alternatives
            _fail(item.source, f"{item.key}.regex", f"a valid regular expression ({error})")


def _vocab_words(spec: Spec) -> tuple[set[str], set[str]]:
    """Every word of the spec's vocab lists, and the stems of its ``word*`` entries."""
    words: set[str] = set()
    stems: set[str] = set()
    for entries in spec.vocab.values():
        for _, _, phrase in entries:
            parts = _NOT_WORD_CHARS.sub(" ", phrase.lower().replace("*", " ")).split()
            words.update(parts)
            if phrase.rstrip().endswith("*") and parts:
                stems.add(parts[-1])
    return words, stems


def _build(spec: Spec, store: RegexStore | None = None) -> RulePack:
    """Compile a (possibly merged) spec into a pack; raises PackError on bad regexes.

    ``store`` keeps the compiled expressions between processes (:mod:`guardrails.regex_cache`).
    """
    compiler = _Compiler(spec, store)
    for name, (source, key, _) in spec.defines.items():
        compiler.macro(source, key, name)
    rules = tuple(
        Rule(item.id, item.weight, compiler.compile(item), VALIDATORS.get(item.validate or ""))
        for item in spec.rules
    )
    if not rules:
        _fail(spec.source, "patterns", "at least one pattern or list")
    ids = {rule.id for rule in rules}
    suppressors: list[Suppressor] = []
    for item in spec.exceptions:
        for index, target in enumerate(item.suppresses or ()):
            if target not in ids:
                where = f"{item.key}.suppresses[{index}]"
                _fail(item.source, where, f"a pattern or list id of pack {spec.name!r}")
        targets = frozenset(item.suppresses) if item.suppresses is not None else None
        suppressors.append(Suppressor(item.id, compiler.compile(item), targets, item.whole_text))
    typo_words: list[str] = []
    for source, key, name in spec.typos:
        if name not in spec.vocab:
            _fail(source, key, f"a vocab name of pack {spec.name!r}")
        typo_words += [w for _, _, w in spec.vocab[name] if not w.endswith("*")]
    return RulePack(
        typos=typo_map(typo_words, *_vocab_words(spec)) if typo_words else {},
        name=spec.name,
        description=spec.description or "",
        normalize=spec.normalize or "words",
        floor=DEFAULT_FLOOR if spec.floor is None else spec.floor,
        rules=rules,
        suppressors=tuple(suppressors),
        spec=spec,
    )


def load_pack(path: str | Path) -> RulePack:
    """Load and compile one pack file on its own.

    Args:
        path: A YAML pack file.

    Returns:
        The compiled pack.

    Raises:
        PackError: The file is unreadable or invalid.
    """
    store = RegexStore()
    pack = _build(read_spec(path), store)
    store.save()
    return pack


def _pack_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise PackError(f"{directory}: pack_dirs: expected a directory of pack files")
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_packs(dirs: Sequence[str | Path] = ()) -> dict[str, RulePack]:
    """Load the built-in packs, then merge in each directory's pack files.

    Args:
        dirs: Directories of ``*.yaml``/``*.yml`` pack files, applied in order (files
            of one directory in name order). A file naming a loaded pack extends it
            (or replaces it with ``replace: true``); a new name adds a pack.

    Returns:
        Packs by name.

    Raises:
        PackError: A directory is missing or a pack file is invalid.
    """
    if isinstance(dirs, str | Path):
        dirs = [dirs]
    specs: dict[str, Spec] = {}
    for directory in [BUILTIN_PACK_DIR, *(Path(d) for d in dirs)]:
        for path in _pack_files(directory):
            spec = read_spec(path)
            base = specs.get(spec.name)
            specs[spec.name] = spec if base is None or spec.replace else merge_specs(base, spec)
    store = RegexStore()
    packs = {name: _build(spec, store) for name, spec in specs.items()}
    store.save()
    return packs


_CACHE: dict[tuple[str, ...], dict[str, RulePack]] = {}
_CACHE_LOCK = threading.Lock()


def _cached_packs(dirs: Sequence[str | Path]) -> dict[str, RulePack]:
    if isinstance(dirs, str | Path):
        dirs = [dirs]
    key = tuple(str(Path(d).resolve()) for d in dirs)
    with _CACHE_LOCK:
        packs = _CACHE.get(key)
        if packs is None:
            packs = _CACHE[key] = load_packs(key)
        return packs


def builtin_pack_names() -> list[str]:
    """The names of the built-in packs, sorted.

    Returns:
        Pack names, which are also the decision names the backend answers by default.
    """
    return sorted(_cached_packs(()))


_ROLE_LINE = re.compile(r"^(?:user|assistant): ", re.MULTILINE)


def _last_text(text: str) -> str:
    """The text to score: ``text`` itself, or a transcript's last ``role: text`` line."""
    if not text.startswith(("user: ", "assistant: ")):
        return text
    starts = [found.end() for found in _ROLE_LINE.finditer(text)]
    return text[starts[-1] :]


class RulesDecisionModel(llm.DecisionModel):
    """Answers probability decisions with rule packs selected by decision name.

    Args:
        pack_dirs: Extra pack directories merged over the built-ins. Packs are loaded
            once per process for each ``pack_dirs`` tuple.
        packs: Packs to use instead of loading any (then ``pack_dirs`` must be empty).

    Raises:
        PackError: A pack directory or file is invalid.
        ValueError: Both ``pack_dirs`` and ``packs`` were given.
    """

    def __init__(
        self,
        *,
        pack_dirs: Sequence[str | Path] = (),
        packs: Mapping[str, RulePack] | None = None,
    ) -> None:
        super().__init__(capabilities=llm.DecisionCapabilities(decision_kinds=["probability"]))
        if packs is not None and pack_dirs:
            raise ValueError("give either pack_dirs or packs, not both")
        self._packs: Mapping[str, RulePack] = (
            dict(packs) if packs is not None else _cached_packs(pack_dirs)
        )

    @property
    def model(self) -> str:
        return "rules"

    @property
    def provider(self) -> str:
        return "local"

    @property
    def pack_names(self) -> list[str]:
        """The decision names this model answers, sorted."""
        return sorted(self._packs)

    async def _evaluate_impl(
        self,
        *,
        input: str,
        decisions: Mapping[str, llm.Decision],
        conn_options: APIConnectOptions,
    ) -> llm.DecisionResponse:
        return evaluate_packs(self, self._packs, input, decisions, rules_score)


def rules_score(name: str, pack: RulePack, text: str) -> tuple[float, dict[str, Any]]:
    """A pack's rules alone: the value and ``provider_data`` (the matched rule ids)."""
    value, matched = pack.score(text)
    return value, {"matched": list(matched)}


#: Scores ``text`` (not a transcript) for the pack a decision named:
#: ``(decision name, pack, text) -> (value, provider_data)``.
PackScorer = Callable[[str, RulePack, str], tuple[float, dict[str, Any]]]


def evaluate_packs(
    model: llm.DecisionModel,
    packs: Mapping[str, RulePack],
    input: str,
    decisions: Mapping[str, llm.Decision],
    score: PackScorer,
) -> llm.DecisionResponse:
    """Answer ``decisions`` by pack name with ``score``: the evaluate loop of every
    pack-backed model (``rules``, ``learned``).

    Args:
        model: The model answering (its ``model`` names the backend in errors and
            the response).
        packs: The packs by decision name.
        input: The text or ``role: text`` transcript; its last line is scored.
        decisions: The decisions asked for; only ``llm.Probability`` is answered.
        score: How a pack scores the text.

    Returns:
        A result per decision with a pack, an error for each other one.
    """
    text = _last_text(input)
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, decision in decisions.items():
        pack = packs.get(name)
        if not isinstance(decision, llm.Probability):
            errors[name] = f"the {model.model} backend answers probability decisions only"
        elif pack is None:
            errors[name] = f"no rules pack named {name!r}"
        else:
            value, data = score(name, pack, text)
            results[name] = llm.ProbabilityResult(value=value, provider_data=data)
    return llm.DecisionResponse(
        results=results, errors=errors, model=model.model, provider=model.provider
    )
