"""Control markers in the LLM reply: stripped from streamed text, reported, and ending the reply."""

from __future__ import annotations

import random

import pytest

from agent.session.markers import (
    CALL_OPENING,
    END_CALL,
    MAX_MARKER_CHARS,
    Marker,
    MarkerFilter,
    ask_guardian_marker,
    contains_marker,
    strip_markers,
    transfer_marker,
)


def _stream(chunks: list[str]) -> tuple[str, list[Marker]]:
    f = MarkerFilter()
    text, markers = "", []
    for chunk in chunks:
        out, found = f.feed(chunk)
        text, markers = text + out, markers + found
    out, found = f.flush()
    return text + out, markers + found


def _kinds(text: str) -> tuple[str, list[str]]:
    out, markers = strip_markers(text)
    return out, [m.kind for m in markers]


def test_each_marker_kind_is_stripped_and_reported() -> None:
    assert strip_markers("[CALL_OPENING] Hello there.") == (
        "Hello there.",
        [Marker("call_opening", None, CALL_OPENING)],
    )
    assert strip_markers("Goodbye! [END_CALL]") == (
        "Goodbye!",
        [Marker("end_call", None, END_CALL)],
    )
    assert strip_markers("One moment. [TRANSFER: billing]") == (
        "One moment.",
        [Marker("transfer", "billing", "[TRANSFER: billing]")],
    )
    assert strip_markers("Let me check [ASK_GUARDIAN: Can we refund order 42?] for you.") == (
        "Let me check for you.",
        [
            Marker(
                "ask_guardian", "Can we refund order 42?", "[ASK_GUARDIAN: Can we refund order 42?]"
            )
        ],
    )


def test_spaces_inside_the_brackets_are_tolerated() -> None:
    assert _kinds("Bye. [ END_CALL ]") == ("Bye.", ["end_call"])
    assert strip_markers("Sure. [ TRANSFER : +1-555.0100 ]")[1][0].arg == "+1-555.0100"


def test_marker_mid_sentence_lets_the_sentence_finish_then_stops() -> None:
    reply = "Thanks for calling [END_CALL] and have a great day! Anything else I can do?"
    assert _kinds(reply) == ("Thanks for calling and have a great day!", ["end_call"])
    reply = "I'll connect you [TRANSFER:sales] right away. Please hold on."
    assert _kinds(reply) == ("I'll connect you right away.", ["transfer"])


def test_marker_after_a_complete_sentence_ends_the_reply_there() -> None:
    assert _kinds("Goodbye! [END_CALL] Anything else?") == ("Goodbye!", ["end_call"])
    assert _kinds('He said "fine." [TRANSFER:billing] And then') == (
        'He said "fine."',
        ["transfer"],
    )
    assert _kinds("Okay.[ASK_GUARDIAN:may I?] More.") == ("Okay.", ["ask_guardian"])


def test_marker_opening_the_reply_keeps_its_first_sentence() -> None:
    assert _kinds("[END_CALL] Goodbye, take care. And more.") == (
        "Goodbye, take care.",
        ["end_call"],
    )


def test_the_end_of_the_stream_ends_the_sentence() -> None:
    assert _kinds("See you [END_CALL] soon") == ("See you soon", ["end_call"])


def test_only_the_first_acting_marker_counts_and_is_reported_once() -> None:
    reply = "Okay [END_CALL] I will [TRANSFER:billing] go [END_CALL]. Bye."
    assert _kinds(reply) == ("Okay I will go.", ["end_call"])
    assert _kinds("Bye. [END_CALL][END_CALL]") == ("Bye.", ["end_call"])


def test_call_opening_does_not_stop_the_reply() -> None:
    assert _kinds("Hi! [CALL_OPENING] How can I help? Ask away.") == (
        "Hi! How can I help? Ask away.",
        ["call_opening"],
    )


@pytest.mark.parametrize(
    "text",
    [
        "[laughs] That's funny.",
        "See note [1] and [note].",
        "Lower case [end_call] is not a marker.",
        "[END_CALLS] [END_CALL x] [TRANSFERS:x] [ASKGUARDIAN:x]",
        "An open [ bracket, and [ END",
        "Arrays like a[0] ] and ]] stay.",
        "  Spaces  and\nnewlines stay as they are.  ",
        "",
    ],
)
def test_text_without_markers_passes_unchanged(text: str) -> None:
    assert strip_markers(text) == (text, [])
    assert not contains_marker(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Let me [TRANSFER:] check. More.", "Let me check. More."),
        ("Hmm [ASK_GUARDIAN:   ] okay.", "Hmm okay."),
        ("Hold on [TRANSFER: bad/target] please.", "Hold on please."),
        ("Too long [TRANSFER:" + "x" * 65 + "] here.", "Too long here."),
        ("Wait [END_CALL: now] a bit.", "Wait a bit."),
        ("Sure [TRANSFER] thing.", "Sure thing."),
    ],
)
def test_malformed_markers_are_stripped_as_invalid_and_not_acted_on(
    text: str, expected: str
) -> None:
    out, markers = strip_markers(text)
    assert out == expected
    assert [m.kind for m in markers] == ["invalid"]
    assert markers[0].arg is None
    assert contains_marker(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello  [CALL_OPENING]  world", "Hello world"),
        ("Hello [CALL_OPENING], world", "Hello, world"),
        ("Hello [CALL_OPENING].", "Hello."),
        ("   [CALL_OPENING]   Hi", "Hi"),
        ("Hi [CALL_OPENING]  ", "Hi"),
        ("One.\n[CALL_OPENING]\nTwo.", "One.\nTwo."),
        ("Thanks [END_CALL] !", "Thanks!"),
        ("Glued[CALL_OPENING]text", "Gluedtext"),
    ],
)
def test_whitespace_is_cleaned_where_a_marker_was_removed(text: str, expected: str) -> None:
    assert strip_markers(text)[0] == expected


SPLIT_TEXTS = [
    "Sure, I'll [END_CALL] let you go now. Anything else?",
    "Goodbye! [END_CALL] Anything else?",
    "[CALL_OPENING] Hello [laughs], how are you? [ TRANSFER : billing dept ] Bye.",
    "Let me ask. [ASK_GUARDIAN: Is [x] allowed?] One moment.",
    "see [[END_CALL] and [TRANSFER:] [1] [ END x",
    "Hi [TRANS [END_CALL] there.",
    "Open [ASK_GUARDIAN: " + "y" * 40 + " never closed",
    "Words  [CALL_OPENING]  , spaced\n[note]   end [END_CALL]",
    "[END_CALL]. Trailing",
    "No markers at all, just text.  ",
]


@pytest.mark.parametrize("text", SPLIT_TEXTS)
def test_any_chunking_gives_the_same_result_as_the_whole_text(text: str) -> None:
    expected = strip_markers(text)
    for cut in range(len(text) + 1):
        assert _stream([text[:cut], text[cut:]]) == expected, cut
    rng = random.Random(20240611)
    for _ in range(200):
        n = rng.randint(1, len(text))
        cuts = sorted(rng.sample(range(1, len(text)), min(n - 1, len(text) - 1)))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert "".join(chunks) == text
        assert _stream(chunks) == expected, chunks
    assert _stream(list(text)) == expected


def test_a_marker_split_across_chunks_is_still_found() -> None:
    assert _stream(["Call [TRANS", "FER:bil", "ling] now."]) == (
        "Call now.",
        [Marker("transfer", "billing", "[TRANSFER:billing]")],
    )


def test_text_is_released_as_soon_as_it_cannot_be_a_marker() -> None:
    f = MarkerFilter()
    assert f.feed("Hi [la") == ("Hi [la", [])
    assert f.feed("ughs] ok [EN") == ("ughs] ok", [])
    assert f.feed("D_CALL]") == ("", [Marker("end_call", None, END_CALL)])


def test_hold_back_is_bounded_for_an_unclosed_marker() -> None:
    text = "Asking [ASK_GUARDIAN: " + "z" * 500 + " and on."
    f = MarkerFilter()
    fed, out = "", ""
    for c in text:
        fed += c
        out += f.feed(c)[0]
        assert len(fed) - len(out) <= MAX_MARKER_CHARS
    assert out == text
    assert f.flush() == ("", [])
    assert not f.done


def test_flush_releases_held_back_text() -> None:
    f = MarkerFilter()
    assert f.feed("Hello [TRANS") == ("Hello", [])
    assert f.flush() == (" [TRANS", [])
    assert f.markers == []


def test_done_ignores_further_input() -> None:
    f = MarkerFilter()
    assert f.feed("Bye now. [END_CALL] ") == ("Bye now.", [Marker("end_call", None, END_CALL)])
    assert f.done
    assert f.feed("More text [TRANSFER:x].") == ("", [])
    assert f.flush() == ("", [])
    assert f.markers == [Marker("end_call", None, END_CALL)]


def test_done_waits_for_the_end_of_the_sentence_in_progress() -> None:
    f = MarkerFilter()
    assert f.feed("Okay [END_CALL] bye") == ("Okay bye", [Marker("end_call", None, END_CALL)])
    assert not f.done
    assert f.feed(" now. Later") == (" now.", [])
    assert f.done
    assert f.feed(" more") == ("", [])


def test_flush_finishes_a_pending_acting_marker() -> None:
    f = MarkerFilter()
    f.feed("Transferring [TRANSFER:sales] you")
    assert not f.done
    assert f.flush() == ("", [])
    assert f.done
    with pytest.raises(RuntimeError):
        f.feed("late")


def test_marker_builders_round_trip() -> None:
    assert transfer_marker(" billing ") == "[TRANSFER:billing]"
    assert strip_markers(transfer_marker("+1 555-0100"))[1][0].arg == "+1 555-0100"
    question = "Can I offer a 10% refund?"
    assert strip_markers(ask_guardian_marker(question))[1] == [
        Marker("ask_guardian", question, f"[ASK_GUARDIAN:{question}]")
    ]
    for bad in ("", "a/b", "x" * 65):
        with pytest.raises(ValueError):
            transfer_marker(bad)
    for bad in (" ", "a]b", "q" * 301):
        with pytest.raises(ValueError):
            ask_guardian_marker(bad)
