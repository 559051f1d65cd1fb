"""A menu corrects a provisional person only when it did not answer us (docs/amd.md).

A short business greeting is a person on timing; when a menu follows before the
agent spoke, or over the agent's speech, the "person" was a recording. A callee
who reads options to us after we spoke is still the person.
"""

from __future__ import annotations

from amd.config import AmdConfig
from tests.unit.test_amd_detector import Timeline

MENU = "For billing, press 1. For appointments, press 2. To speak to our staff, press 0."


def greeted() -> Timeline:
    """Answer at 0, "Acme Dental." from 0.4 to 1.0: a provisional person at 1.5."""
    call = Timeline()
    call.answered(0.0)
    call.say(0.4, 1.0, "Acme Dental.")
    call.run_until(1.6)
    (p,) = call.predictions
    assert (p.category, p.stage, p.provisional) == ("human", "human", True)
    return call


def test_a_menu_before_the_agent_spoke_corrects_the_person() -> None:
    call = greeted()
    call.say(1.7, 6.0, MENU)
    ivr = call.predictions[-1]
    assert ivr.category == "machine-ivr" and ivr.stage == "machine-ivr"
    assert ivr.changed and not ivr.provisional
    assert "corrects a provisional person" in ivr.reason
    assert call.detector.stage == "machine-ivr" and not call.detector.provisional
    call.run_until(20.0)
    assert call.completions == []  # the confirm timer was cancelled: no person at 6.5 s
    call.call_ended(30.0)
    assert "human" not in call.completed.stages


def test_a_menu_over_the_agents_speech_corrects_the_person() -> None:
    call = greeted()
    call.agent_starts(1.6)
    call.say(2.0, 6.5, MENU)  # the recording talks on while the agent greets
    call.agent_ends(6.8, "Hi, this is Sam from Acme Dental.")
    ivr = next(p for p in call.predictions if p.category == "machine-ivr")
    assert ivr.stage == "machine-ivr" and "corrects a provisional person" in ivr.reason
    assert call.detector.stage == "machine-ivr"


def test_options_read_to_us_after_we_spoke_keep_the_person() -> None:
    call = greeted()
    call.agent(1.6, 3.5, "Hi, this is Sam from Acme Dental. Who handles billing?")
    call.say(4.2, 8.5, MENU)  # a receptionist answering us, not over us
    assert call.detector.stage == "human"
    assert not any(p.stage == "machine-ivr" for p in call.predictions)
    done = call.completed
    assert done.category == "human" and done.stages == ("human",)


def test_the_rest_of_an_utterance_transcribed_after_we_spoke_is_not_an_answer() -> None:
    """The recogniser hands one long utterance over in pieces: the first piece makes a
    provisional person, the agent starts, and the menu in the second piece (speech that
    began before we spoke) corrects the verdict instead of confirming it."""
    call = Timeline(AmdConfig())
    call.answered(0.0)
    call.say(0.7, 5.7, "Hello, City Water.", final_at=6.0)
    call.run_until(6.31)
    assert call.detector.stage == "human" and call.detector.provisional
    call.agent_starts(6.32)
    call.transcript(6.35, "Please enter your account number, followed by the pound sign.")
    assert call.detector.stage == "machine-ivr"
    call.call_ended(20.0)
    assert call.completed.stages == ("machine-ivr",)


def test_a_person_who_answers_after_we_spoke_is_still_confirmed() -> None:
    call = Timeline(AmdConfig())
    call.answered(0.0)
    call.say(0.5, 1.0, "Hello?")
    call.run_until(1.4)
    call.agent(1.4, 4.0, "Hi, this is Sam from Acme Dental.")
    call.say(4.6, 5.4, "Oh, hi. Go ahead.")
    call.run_until(6.5)
    assert call.completed.category == "human"
    assert call.completed.stages == ("human",)


def talked_over(end: float, text: str) -> Timeline:
    """The provisional person of :func:`greeted`; the agent starts at 1.6, the callee
    talks over it from 1.8 until ``end`` (saying ``text``), and the agent yields at 2.2."""
    call = greeted()
    call.agent_starts(1.6)
    call.speech_starts(1.8)
    call.agent_ends(2.2, "Hi, this is Sam")
    call.speech_stops(end)
    call.transcript(end, text)
    return call


def test_a_menu_that_started_over_us_and_goes_on_in_pieces_after_we_stopped_corrects() -> None:
    """The menu starts as the agent answers the greeting; the agent yields, and the
    recogniser hands the menu over in pieces with short pauses between them. Each piece
    after the first began while the agent was quiet, but it continues speech said over
    us, so the menu in them corrects the verdict (ivr-greeting-pause-then-menu in a
    slow voice: "Hot lane, 3-1." / "So, when you walk, pray to..." / "... pray for")."""
    call = talked_over(3.5, "For claims,")
    call.say(3.9, 6.0, "For a new quote, press 2.")
    call.say(6.4, 8.5, "To speak with an agent, press 0.")
    assert call.detector.stage == "machine-ivr"
    assert any("corrects a provisional person" in p.reason for p in call.predictions)


def test_a_piece_after_the_agent_spoke_again_is_an_answer_again() -> None:
    call = talked_over(2.4, "Sorry?")
    call.agent(2.6, 3.3, "This is Sam from Acme Dental.")  # we spoke again: a new exchange
    call.say(3.6, 7.5, MENU)  # read to us, as in the test above
    assert call.detector.stage == "human"
    assert not any(p.stage == "machine-ivr" for p in call.predictions)


def test_a_piece_after_a_long_pause_is_not_a_continuation() -> None:
    call = talked_over(2.4, "Sorry?")
    call.say(2.4 + AmdConfig().long_greeting_silence + 0.5, 8.0, MENU)
    assert call.detector.stage == "human"
