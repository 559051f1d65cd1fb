"""SentenceGate: released text is exactly the LLM's text; a block stops everything after it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from livekit.agents import llm
from livekit.agents.types import FlushSentinel

from agent.session.sentences import SentenceGate, split_sentences


def _no_flush(items: list[object]) -> list[object]:
    return [x for x in items if not isinstance(x, FlushSentinel)]


async def _stream(pieces: list[object]) -> AsyncIterator[object]:
    for p in pieces:
        yield p


def test_split_keeps_whitespace_and_merges_short_fragments() -> None:
    done, rest = split_sentences("Hi. How are you today? I am", final=False)
    assert done == ["Hi. How are you today? "]
    assert rest == "I am"
    done, rest = split_sentences("Fine.", final=True)
    assert done == ["Fine."] and rest == ""


async def test_released_text_is_exactly_what_the_llm_produced() -> None:
    text = "Hello there, Dana!  This is Sam from Acme.\nCan you talk now?  Great"
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    seen: list[tuple[int, str]] = []

    async def allow(run_id: str, index: int, sentence: str) -> bool:
        seen.append((index, sentence))
        return True

    gate = SentenceGate(run_id="speech_1", check=allow)
    raw = [x async for x in gate.process(_stream(pieces))]
    out = _no_flush(raw)
    assert "".join(out) == text  # type: ignore[arg-type]
    # each sentence is followed by a flush so TTS starts on it without lookahead
    assert [type(x).__name__ for x in raw] == ["str", "FlushSentinel"] * 4
    assert [i for i, _ in seen] == [0, 1, 2, 3]
    # the first piece ends at its first clause; the name is too short to stand alone
    assert [sentence for _, sentence in seen[:2]] == [
        "Hello there, ",
        "Dana!  This is Sam from Acme.\n",
    ]


async def test_a_blocked_sentence_stops_the_stream_and_tool_calls_after_it() -> None:
    tool = llm.ChatChunk(
        id="x",
        delta=llm.ChoiceDelta(
            role="assistant",
            tool_calls=[llm.FunctionToolCall(name="transfer", arguments="{}", call_id="c1")],
        ),
    )
    pieces: list[object] = ["First sentence is fine. ", "Second one is secret. ", tool, "More."]

    async def block_secret(run_id: str, index: int, sentence: str) -> bool:
        return "secret" not in sentence

    gate = SentenceGate(run_id="speech_2", check=block_secret)
    out = _no_flush([x async for x in gate.process(_stream(pieces))])
    assert out == ["First sentence is fine. "]
    assert gate.blocked and gate.released == ["First sentence is fine. "]


async def test_tool_call_chunks_pass_through_unchanged() -> None:
    tool = llm.ChatChunk(
        id="x",
        delta=llm.ChoiceDelta(
            role="assistant",
            tool_calls=[llm.FunctionToolCall(name="lookup", arguments="{}", call_id="c2")],
        ),
    )

    async def allow(run_id: str, index: int, sentence: str) -> bool:
        return True

    gate = SentenceGate(run_id="speech_3", check=allow)
    out = _no_flush([x async for x in gate.process(_stream(["Let me check that for you. ", tool]))])
    assert out[0] == "Let me check that for you. "
    assert isinstance(out[1], llm.ChatChunk) and out[1].delta is not None
    assert out[1].delta.tool_calls[0].name == "lookup"


def test_the_first_piece_may_end_at_a_clause_so_speech_starts_sooner() -> None:
    done, rest = split_sentences(
        "It's still coming on Friday, but I'm sure", final=False, first_clause=True
    )
    assert done == ["It's still coming on Friday, "] and rest == "but I'm sure"
    # two words are enough for the first piece
    assert split_sentences("I'm Sam, a friendly assistant", final=False, first_clause=True) == (
        ["I'm Sam, "],
        "a friendly assistant",
    )
    # a one-word lead-in is not split off, and a sentence that ends first wins
    assert split_sentences("Yes, sure. I can do that", final=False, first_clause=True) == (
        ["Yes, sure. "],
        "I can do that",
    )
    # later pieces are whole sentences
    assert split_sentences("Well then, as I said, fine", final=False) == (
        [],
        "Well then, as I said, fine",
    )


async def test_only_the_first_piece_of_a_reply_is_a_clause() -> None:
    text = "It's still coming on Friday, but I'm not sure when. Later, we can check, maybe."
    pieces = [text[i : i + 4] for i in range(0, len(text), 4)]

    async def allow(run_id: str, index: int, sentence: str) -> bool:
        return True

    gate = SentenceGate(run_id="speech_4", check=allow)
    out = _no_flush([x async for x in gate.process(_stream(pieces))])
    assert out == [
        "It's still coming on Friday, ",
        "but I'm not sure when. ",
        "Later, we can check, maybe.",
    ]


def test_sentences_are_checked_concurrently_and_released_in_order() -> None:
    import asyncio

    from agent.core import clock

    # the first sentence's check is the slowest: later ones finish first but wait their turn
    delays = {0: 0.3, 1: 0.1, 2: 0.2}
    finished: list[int] = []

    async def check(run_id: str, index: int, sentence: str) -> bool:
        await asyncio.sleep(delays[index])
        finished.append(index)
        return True

    async def main() -> tuple[list[object], float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        gate = SentenceGate(run_id="speech_4", check=check)
        text = ["One sentence here. ", "Another one here. ", "And the last one."]
        out = _no_flush([x async for x in gate.process(_stream(text))])
        return out, loop.time() - t0

    out, took = clock.run(main())
    assert out == ["One sentence here. ", "Another one here. ", "And the last one."]
    assert finished == [1, 2, 0]
    assert took == pytest.approx(0.3, abs=0.01)  # concurrent: the slowest check, not the sum


def test_buffered_reply_is_checked_whole_and_replaced_when_denied() -> None:
    from agent.core import clock

    asked: list[str] = []

    async def allow(run_id: str, index: int, sentence: str) -> bool:
        return True

    async def deny_cards(run_id: str, text: str) -> tuple[bool, str | None]:
        asked.append(text)
        return ("4111" not in text, "I can't read that out.")

    async def main(pieces: list[object]) -> list[object]:
        gate = SentenceGate(run_id="speech_5", check=allow, reply_check=deny_cards)
        return _no_flush([x async for x in gate.process(_stream(pieces))])

    ok = clock.run(main(["Your appointment is at ten. ", "See you then."]))
    assert ok == ["Your appointment is at ten. See you then."]
    denied = clock.run(main(["Sure. Your card is 4111 1111 1111 1111. ", "Bye."]))
    assert denied == ["I can't read that out."]
    assert asked == [
        "Your appointment is at ten. See you then.",
        "Sure. Your card is 4111 1111 1111 1111. Bye.",
    ]
