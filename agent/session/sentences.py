"""SentenceGate: splits the LLM text stream into sentences and releases each after a check.

The released text is exactly what the LLM produced (whitespace included); only
the grouping changes. The first piece of a reply may be a clause rather than a
whole sentence (see :func:`split_sentences`): on a 2-core machine it lets the
first audio start a few hundred milliseconds sooner. Tool-call chunks pass
through untouched. After each released sentence the gate yields livekit's
``FlushSentinel`` so TTS starts on it at once. Sentences are checked
concurrently and released in order. When a check blocks a sentence, nothing
more is released and the upstream LLM stream is closed, so no later text or
tool call escapes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from livekit.agents import llm
from livekit.agents.types import FlushSentinel

__all__ = ["SentenceGate", "split_sentences"]

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) and whitespace.
_BOUNDARY = re.compile(r"[.!?…]+[\"')\]]*\s+")
_MIN_SENTENCE_CHARS = 8
_CLAUSE = re.compile(r"[,;:]\s+")
#: The first piece of a reply may end at a clause once it has this many characters
#: and :data:`FIRST_CLAUSE_WORDS` words ("I'm Sam," but not "Yes,"): the first audio
#: then waits for a few tokens and a short synthesis, not for a whole sentence
FIRST_CLAUSE_CHARS = 6
FIRST_CLAUSE_WORDS = 2

Check = Callable[[str, int, str], Awaitable[bool]]


def split_sentences(
    buffer: str, *, final: bool, first_clause: bool = False
) -> tuple[list[str], str]:
    """Split complete sentences off the front of ``buffer``.

    Returns the sentences (each keeping its trailing whitespace) and the rest.
    Very short fragments ("Hi. ") are merged with what follows so TTS does not
    get one-word sentences. With ``first_clause``, the first piece may also end
    at a clause boundary (``, ; :``) with at least ``FIRST_CLAUSE_CHARS`` characters
    and ``FIRST_CLAUSE_WORDS`` words before it, so speech can start before a long
    first sentence is complete.
    """
    out: list[str] = []
    start = 0
    if first_clause:
        sentence = _BOUNDARY.search(buffer)
        for m in _CLAUSE.finditer(buffer):
            if sentence is not None and sentence.start() < m.start():
                break  # the sentence ends first: split there as usual
            lead = buffer[: m.start()]
            if len(lead) >= FIRST_CLAUSE_CHARS and len(lead.split()) >= FIRST_CLAUSE_WORDS:
                out.append(buffer[: m.end()])
                start = m.end()
                break
    for m in _BOUNDARY.finditer(buffer, start):
        if m.end() - start < _MIN_SENTENCE_CHARS:
            continue
        out.append(buffer[start : m.end()])
        start = m.end()
    rest = buffer[start:]
    if final and rest:
        out.append(rest)
        rest = ""
    return out, rest


ReplyCheck = Callable[[str, str], Awaitable[tuple[bool, str | None]]]


class SentenceGate:
    """Wraps an LLM chunk stream; yields text one checked sentence at a time.

    Sentences are checked concurrently (each check starts as soon as the
    sentence is complete) and released in order. With ``reply_check`` the
    reply is buffered: nothing is released until the whole reply has passed
    its sentence checks and ``reply_check(run_id, text)`` allowed it; a denied
    reply is replaced by the replacement text it returns (or dropped).
    """

    def __init__(
        self,
        *,
        run_id: str,
        check: Check | None,
        reply_check: ReplyCheck | None = None,
    ) -> None:
        self.run_id = run_id
        self._check = check
        self._reply_check = reply_check
        self._queued = 0
        self.blocked = False
        self.released: list[str] = []

    def _start_check(self, sentence: str) -> asyncio.Future[bool] | None:
        if not sentence.strip() or self._check is None:
            return None
        index = self._queued
        self._queued += 1
        return asyncio.ensure_future(self._check(self.run_id, index, sentence))

    async def process(self, upstream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Yield what ``upstream`` yields, text regrouped into checked sentences."""
        queue: asyncio.Queue[tuple[str, Any, asyncio.Future[bool] | None]] = asyncio.Queue()
        pump = asyncio.ensure_future(self._pump(upstream, queue))
        held: list[str] = []
        try:
            while True:
                what, item, verdict = await queue.get()
                if what == "end":
                    break
                if what == "error":
                    raise item
                if what == "pass":
                    yield item
                    continue
                if verdict is not None and not await verdict:
                    self.blocked = True
                    return
                if self._reply_check is not None:
                    held.append(item)
                    continue
                self.released.append(item)
                yield item
                if item.strip():
                    # end the TTS segment here: livekit's sentence tokenizer would otherwise
                    # hold this sentence back until the next one starts (lookahead)
                    yield FlushSentinel()
            if self._reply_check is not None and held:
                text = "".join(held)
                allowed, replacement = await self._reply_check(self.run_id, text)
                out = text if allowed else (replacement or "")
                if not allowed:
                    self.blocked = True
                if out:
                    self.released.append(out)
                    yield out
        finally:
            pump.cancel()
            while not queue.empty():
                _, _, pending = queue.get_nowait()
                if pending is not None:
                    pending.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            aclose = getattr(upstream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _pump(
        self,
        upstream: AsyncIterator[Any],
        queue: asyncio.Queue[tuple[str, Any, asyncio.Future[bool] | None]],
    ) -> None:
        """Read the LLM stream, queue sentences with their checks (started at once)."""
        buffer = ""
        try:
            async for chunk in upstream:
                text, passthrough = _split_chunk(chunk)
                if passthrough is not None:
                    queue.put_nowait(("pass", passthrough, None))
                if not text:
                    continue
                buffer += text
                sentences, buffer = split_sentences(
                    buffer, final=False, first_clause=self._queued == 0
                )
                for s in sentences:
                    queue.put_nowait(("text", s, self._start_check(s)))
            sentences, buffer = split_sentences(buffer, final=True)
            for s in sentences:
                queue.put_nowait(("text", s, self._start_check(s)))
        except Exception as exc:
            queue.put_nowait(("error", exc, None))
        finally:
            queue.put_nowait(("end", None, None))


def _split_chunk(chunk: Any) -> tuple[str, Any | None]:
    """Separate a chunk's text from what must pass through unchanged (tool calls, usage)."""
    if isinstance(chunk, str):
        return chunk, None
    if isinstance(chunk, llm.ChatChunk):
        delta = chunk.delta
        if delta is None:
            return "", chunk
        text = delta.content or ""
        if delta.tool_calls:
            rest = chunk.model_copy(update={"delta": delta.model_copy(update={"content": None})})
            return text, rest
        return text, None
    return "", chunk
