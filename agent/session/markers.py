"""Control markers in the LLM reply: found, stripped and reported while the text streams.

The LLM steers the call by writing markers into its reply: ``[END_CALL]``,
``[TRANSFER:billing]``, ``[ASK_GUARDIAN:question]``; it may also echo the
``[CALL_OPENING]`` user turn. :class:`MarkerFilter` removes them from text
chunks split anywhere, so they never reach TTS, transcripts or history, and
reports them. The output depends only on the whole text, never on how it was
split into chunks. An acting marker (end call, transfer, ask guardian) lets the
agent finish the sentence in progress; after that the filter is ``done``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CALL_OPENING",
    "END_CALL",
    "MAX_MARKER_CHARS",
    "Marker",
    "MarkerFilter",
    "MarkerKind",
    "ask_guardian_marker",
    "contains_marker",
    "strip_markers",
    "transfer_marker",
]

MarkerKind = Literal["call_opening", "end_call", "transfer", "ask_guardian", "invalid"]

CALL_OPENING = "[CALL_OPENING]"
END_CALL = "[END_CALL]"
#: A marker, brackets included, is at most this long; so is the text held back waiting for one.
MAX_MARKER_CHARS = 330
_MAX_QUESTION_CHARS = 300

_NAMES = ("CALL_OPENING", "END_CALL", "TRANSFER", "ASK_GUARDIAN")
_MARKER = re.compile(r"\[\s*(CALL_OPENING|END_CALL|TRANSFER|ASK_GUARDIAN)\s*(?::([^\]]*))?\]")
_TARGET = re.compile(r"[A-Za-z0-9+\-_. ]{1,64}")
_ACTING = frozenset({"end_call", "transfer", "ask_guardian"})
# The text emitted so far ends a sentence (closing quotes/brackets may follow the punctuation).
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*$")
_NO_SPACE_BEFORE = frozenset(",.;:!?…)")
_TAIL_CHARS = 16


@dataclass(frozen=True)
class Marker:
    """A control marker found in the reply text.

    Attributes:
        kind: What the marker asks for; ``"invalid"`` for a malformed marker
            (stripped, never acted on).
        arg: The transfer target or the guardian question (trimmed), else None.
        raw: The marker exactly as the LLM wrote it.
    """

    kind: MarkerKind
    arg: str | None
    raw: str


def transfer_marker(target: str) -> str:
    """Return the marker that transfers the call to ``target``.

    Raises:
        ValueError: ``target`` is not 1-64 letters, digits, ``+ - _ .`` or spaces.
    """
    if not _TARGET.fullmatch(target.strip()):
        raise ValueError(f"transfer target {target!r}: expected 1-64 of A-Z a-z 0-9 + - _ . space")
    return f"[TRANSFER:{target.strip()}]"


def ask_guardian_marker(question: str) -> str:
    """Return the marker that puts the caller on hold and asks the guardian ``question``.

    Raises:
        ValueError: ``question`` is empty, longer than 300 characters or contains ``]``.
    """
    text = " ".join(question.split())
    if not 0 < len(text) <= _MAX_QUESTION_CHARS or "]" in text:
        raise ValueError(f"guardian question: expected 1-{_MAX_QUESTION_CHARS} chars without ']'")
    return f"[ASK_GUARDIAN:{text}]"


def _classify(raw: str) -> Marker | None:
    """Return the marker ``raw`` (a bracketed candidate) spells, or None for ordinary text."""
    m = _MARKER.fullmatch(raw)
    if m is None:
        return None
    arg = None if m.group(2) is None else " ".join(m.group(2).split())
    match m.group(1), arg:
        case "CALL_OPENING", None:
            return Marker("call_opening", None, raw)
        case "END_CALL", None:
            return Marker("end_call", None, raw)
        case "TRANSFER", str(target) if _TARGET.fullmatch(target):
            return Marker("transfer", target, raw)
        case "ASK_GUARDIAN", str(question) if 0 < len(question) <= _MAX_QUESTION_CHARS:
            return Marker("ask_guardian", question, raw)
    return Marker("invalid", None, raw)


def _could_start(text: str) -> bool:
    """Whether ``text`` ("[" and no "]") can still grow into something `_MARKER` matches."""
    rest = text[1:].lstrip()
    for name in _NAMES:
        if name.startswith(rest):
            return True
        if rest.startswith(name):
            after = rest[len(name) :].lstrip()
            return not after or after[0] == ":"
    return False


def _match(buf: str, i: int, final: bool) -> tuple[int, Marker | None] | None:
    """Decide the "[" at ``buf[i]``: (end, marker), (i + 1, None) for text, None if undecided.

    A decision reads at most ``MAX_MARKER_CHARS`` characters and never changes
    when more text arrives, which keeps the output independent of chunking.
    """
    close = buf.find("]", i + 1, i + MAX_MARKER_CHARS)
    if close >= 0:
        marker = _classify(buf[i : close + 1])
        return (i + 1, None) if marker is None else (close + 1, marker)
    if final or len(buf) - i >= MAX_MARKER_CHARS or not _could_start(buf[i:]):
        return i + 1, None
    return None


class MarkerFilter:
    """Removes control markers from a stream of LLM text chunks and reports them.

    Text is held back only while it could still be the start of a marker (at
    most ``MAX_MARKER_CHARS``), plus trailing whitespace until the next word
    shows whether a marker follows. Where a marker was removed, the spaces
    around it collapse to one, and to none at the start of the output or
    before punctuation. After the first acting marker (end call, transfer, ask
    guardian) the sentence in progress is finished (a reply that starts with
    the marker keeps its first sentence) and everything after it is dropped;
    later markers in that sentence are stripped without being reported.
    """

    def __init__(self) -> None:
        """Start filtering one reply."""
        self._buf = ""  # input not yet decided: starts at a "[" that may open a marker
        self._out: list[str] = []
        self._found: list[Marker] = []
        self._markers: list[Marker] = []
        self._pending_ws = ""
        self._tail = ""  # the last characters emitted, to recognise a sentence end
        self._after_marker = False
        self._stopping = False
        self._done = False
        self._flushed = False

    @property
    def done(self) -> bool:
        """True once an acting marker's sentence is finished; further input is ignored."""
        return self._done

    @property
    def markers(self) -> list[Marker]:
        """All markers reported so far, in order."""
        return list(self._markers)

    def feed(self, chunk: str) -> tuple[str, list[Marker]]:
        """Take the next chunk of reply text.

        Returns:
            The text safe to emit now and the markers found in it.

        Raises:
            RuntimeError: Called after :meth:`flush`.
        """
        if self._flushed:
            raise RuntimeError("MarkerFilter.feed() called after flush()")
        if not self._done:
            self._buf += chunk
            self._scan(final=False)
        return self._take()

    def flush(self) -> tuple[str, list[Marker]]:
        """End the stream: release held-back text and finish a pending acting marker.

        Returns:
            The remaining text to emit and the markers found in it.
        """
        if not (self._flushed or self._done):
            self._scan(final=True)
            if not (self._done or self._after_marker or self._stopping):
                self._emit(self._pending_ws)
            self._done = self._stopping
        self._flushed = True
        return self._take()

    def _scan(self, final: bool) -> None:
        buf, pos = self._buf, 0
        while not self._done:
            i = buf.find("[", pos)
            self._text(buf[pos : len(buf) if i < 0 else i])
            if i < 0 or self._done:
                pos = len(buf)
                break
            step = _match(buf, i, final)
            if step is None:
                pos = i
                break
            pos, marker = step
            if marker is None:
                self._text("[")
            else:
                self._marker(marker)
        self._buf = "" if self._done else buf[pos:]

    def _text(self, text: str) -> None:
        for c in text:
            if c.isspace():
                if self._stopping and _SENTENCE_END.search(self._tail):
                    self._done = True
                    return
                self._pending_ws += c
                continue
            ws, self._pending_ws = self._pending_ws, ""
            if ws and self._after_marker:
                if not self._tail or c in _NO_SPACE_BEFORE:
                    ws = ""
                else:
                    ws = "\n" if "\n" in ws else " "
            self._emit(ws + c)
            self._after_marker = False

    def _marker(self, marker: Marker) -> None:
        self._after_marker = True
        if self._stopping:
            return  # only the first acting marker counts
        self._found.append(marker)
        self._markers.append(marker)
        if marker.kind in _ACTING:
            self._stopping = True
            self._done = bool(_SENTENCE_END.search(self._tail))

    def _emit(self, text: str) -> None:
        if text:
            self._out.append(text)
            self._tail = (self._tail + text)[-_TAIL_CHARS:]

    def _take(self) -> tuple[str, list[Marker]]:
        text, found = "".join(self._out), self._found
        self._out, self._found = [], []
        return text, found


def strip_markers(text: str) -> tuple[str, list[Marker]]:
    """Filter a whole reply: the same result as feeding it to a :class:`MarkerFilter` and flushing.

    Returns:
        The text to speak and the markers found.
    """
    f = MarkerFilter()
    head, first = f.feed(text)
    rest, more = f.flush()
    return head + rest, first + more


def contains_marker(text: str) -> bool:
    """Whether ``text`` holds any control marker, malformed ones included."""
    return bool(strip_markers(text)[1])
