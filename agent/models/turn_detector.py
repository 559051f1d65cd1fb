"""LexicalTurnDetector: is the callee done, judging by how their words end?

A livekit turn detector (``turn_detection=`` on the AgentSession). After the VAD has
heard ``min_endpointing_delay`` of silence, livekit asks it how likely the transcript
so far ends the callee's turn; below :meth:`unlikely_threshold` it waits up to
``max_endpointing_delay`` instead, and speech that resumes meanwhile cancels the wait.

The judgement is lexical and language-specific (English): an utterance that stops on a
word that cannot end a sentence ("to", "the", "and", "my", "um") or on a trailing
comma, dash or ellipsis, or on a verb still missing its object ("Do I need to
bring"), was interrupted by a pause, not finished. So a caller who says
"I'd like to move it to ... Thursday" is not answered in the gap, while a finished
sentence is answered as soon as the short delay allows. It needs no model weights and
answers in microseconds.
"""

from __future__ import annotations

import re

from livekit.agents import llm

__all__ = ["LexicalTurnDetector", "end_of_turn_probability"]

#: words after which an English utterance is not over: words that rarely end a
#: finished sentence on a call ("in", "about" and "from" sometimes do, "what's it
#: about?", but a caller cut off mid-sentence costs more than a late reply). "it",
#: "that", "on", "do" and the like end short answers ("I'll take it", "hold on",
#: "yes I do") and are left out on purpose.
_DANGLING = frozenset(
    """
    a an the my your our their
    to of for with at in into onto from about by via per than as
    and or but nor because if although though unless whether while
    i we they he she i'm we're you're they're it's there's that's what's
    i'll we'll you'll i've we've i'd we'd
    gonna wanna gotta let's
    um uh er erm uhm hmm mm ah
    """.split()
)
#: verbs that cannot end a clause without their object: "Do I need to bring" stopped
#: before it (the recogniser often adds the question mark), unless a question word
#: asked for that object ("What do I need to bring?", "Where do I send?"). Verbs that
#: often end a clause on their own ("want", "need", "pay", "take") are left out.
_NEEDS_OBJECT = frozenset("bring give put send".split())
_QUESTION_WORDS = frozenset("what which who whom whose where how why when whatever".split())
_SENTENCE_END = re.compile(r"[.!?]+\s+")
#: a pause mark at the very end of the transcript
_TRAILING_PAUSE = re.compile(r"(,|;|:|-|–|—|\.\.\.|…)\s*$")
_WORD = re.compile(r"[a-z']+")

#: probability given to an utterance that reads as unfinished / finished
UNFINISHED = 0.05
FINISHED = 0.95


def end_of_turn_probability(text: str) -> float:
    """How likely ``text`` (the callee's words so far) is a finished turn (0 to 1)."""
    stripped = text.strip()
    if not stripped:
        return FINISHED
    if _TRAILING_PAUSE.search(stripped):
        return UNFINISHED
    words = _WORD.findall(stripped.lower())
    if not words:
        return FINISHED
    if words[-1] in _DANGLING:
        return UNFINISHED
    if words[-1] in _NEEDS_OBJECT:
        sentence = _WORD.findall(_SENTENCE_END.split(stripped.lower())[-1])
        if not _QUESTION_WORDS.intersection(sentence):
            return UNFINISHED
    return FINISHED


class LexicalTurnDetector:
    """livekit's turn-detector protocol over :func:`end_of_turn_probability`.

    Args:
        threshold: below this probability livekit waits ``max_endpointing_delay``.
    """

    def __init__(self, threshold: float = 0.5) -> None:
        self._threshold = threshold

    @property
    def model(self) -> str:
        """Name reported in livekit's metrics."""
        return "lexical"

    @property
    def provider(self) -> str:
        """Provider reported in livekit's metrics."""
        return "callrt"

    async def unlikely_threshold(self, language: str | None) -> float | None:
        """Below this, the turn is unlikely to be over."""
        return self._threshold

    async def supports_language(self, language: str | None) -> bool:
        """English only (the word lists are English); others fall back to silence."""
        return language is None or str(language).lower().startswith("en")

    async def predict_end_of_turn(
        self,
        chat_ctx: llm.ChatContext,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (livekit's protocol)
    ) -> float:
        """The probability that the latest user message ends the callee's turn."""
        for item in reversed(chat_ctx.items):
            if isinstance(item, llm.ChatMessage) and item.role == "user":
                return end_of_turn_probability(item.text_content or "")
        return FINISHED
