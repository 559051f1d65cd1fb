"""The lexical end-of-turn judge: unfinished words wait, finished sentences do not."""

from __future__ import annotations

import pytest
from livekit.agents import llm

from agent.models.turn_detector import (
    FINISHED,
    UNFINISHED,
    LexicalTurnDetector,
    end_of_turn_probability,
)


@pytest.mark.parametrize(
    "text",
    [
        "I was wondering if we could move it to",
        "I was wondering if we could move it to...",
        "Could you tell me the",
        "Yes, and",
        "I need to check with my",
        "So, um",
        "It's for my daughter,",
        "Well —",
        "I think that's",
        "Do I need to bring?",
        "Okay. Can you send",
        "Where do I send it? And could you give",
        "ok so i'm",
    ],
)
def test_words_that_stop_mid_sentence_are_unfinished(text: str) -> None:
    assert end_of_turn_probability(text) == UNFINISHED


@pytest.mark.parametrize(
    "text",
    [
        "Hello, this is Priya.",
        "Yes, I do.",
        "Hold on.",
        "I'll take it.",
        "Thanks, bye.",
        "Can you call me back on Thursday?",
        "Sure, that works for me",
        "My number is",  # ambiguous: a number may follow, but so may nothing
        "What do I need to bring?",
        "Where should I send?",
        "Okay. Which one do you want me to bring?",
        "Sure, if you want.",
        "",
    ],
)
def test_finished_or_ambiguous_utterances_are_not_held(text: str) -> None:
    assert end_of_turn_probability(text) == FINISHED


async def test_the_detector_reads_the_latest_user_message() -> None:
    detector = LexicalTurnDetector()
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="Hi, this is Dana.")
    ctx.add_message(role="assistant", content="Hi Dana, how can I help?")
    assert await detector.predict_end_of_turn(ctx) == FINISHED
    ctx.add_message(role="user", content="I wanted to move my appointment to")
    assert await detector.predict_end_of_turn(ctx) < (await detector.unlikely_threshold("en"))
    assert await detector.supports_language("en")
    assert not await detector.supports_language("de")
