"""Single utterances the pre-gate or the lexical classifier must place right.

These are not in the recorded-call suite: they check that the phrase packs and
person markers generalise beyond the calls the detector was written with.
"""

from __future__ import annotations

import pytest

from amd.classifier import score_turn
from amd.phrases import HINT_WEIGHT, classify_phrases

# one utterance per line reads best here, even past the line length
CASES = [
    ("human", "Hello, this is Robert."),
    ("human", "Yeah, who's this?"),
    ("human", "Hi there, how can I help you?"),
    ("human", "Dr. Patel's office, Maria speaking."),
    ("human", "Hello? Hello? Can you hear me?"),
    ("human", "Yes?"),
    ("human", "This is Jen, I'm driving right now, can you make it quick?"),
    ("human", "Sorry, he's busy, can you try again later?"),
    ("machine-vm", "Hi, you've reached Tom. I'm not available right now. Please leave a message."),
    ("machine-vm", "The wireless customer you are trying to reach is not available. Please leave a message after the tone."),
    ("machine-vm", "Hey it's Sarah, leave a message."),
    ("machine-vm", "You have reached the voicemail of 5 5 5 1 2 3 4."),
    ("machine-vm", "Sorry I missed your call, I'll call you back as soon as I can."),
    ("machine-vm", "I'm not around, try again later or leave a message after the beep."),
    ("machine-ivr", "Thank you for calling First National Bank. For account balances, press 1. To report a lost card, press 2."),
    ("machine-ivr", "Para español, oprima el dos."),
    ("machine-ivr", "Please enter your account number followed by the pound key."),
    ("machine-screening", "Hi, the person you're calling is using Call Screen from Google. Go ahead and say your name and why you're calling."),
    ("machine-screening", "Please state your name and the reason for your call, and I'll see if this person is available."),
    ("machine-screening", "Hi, this is an automated assistant. Who's calling, please?"),
    ("machine-unavailable", "We're sorry, the number you have dialed is not in service. Please check the number and try again."),
    ("machine-unavailable", "The mailbox is full and cannot accept any messages at this time. Goodbye."),
    ("machine-unavailable", "The subscriber you are trying to reach is not available. Please try again later."),
    ("machine-unavailable", "Your call cannot be completed as dialed."),
    ("wait", "Please hold while I transfer your call."),
    ("wait", "One moment please."),
]  # fmt: skip


@pytest.mark.parametrize(("expected", "text"), CASES, ids=[t[:40] for _, t in CASES])
def test_utterance_is_placed_right(expected: str, text: str) -> None:
    verdict = classify_phrases([text])
    if verdict is not None and verdict.strength > HINT_WEIGHT:
        got = verdict.category  # the pre-gate settles it
    else:
        got = score_turn([text]).category  # the classifier does
    assert got == expected
