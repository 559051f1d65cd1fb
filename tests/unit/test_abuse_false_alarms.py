"""Ordinary caller sentences never trip the abuse check (issue 17).

Insults aimed at someone who is not on the call ("my idiot brother") and profanity
used for emphasis ("you're fucking brilliant") are not abuse of the agent. The
regression set is ``tests/data/abuse_ordinary.txt``; each sentence must score below
every ``abusive`` threshold of the shipped agent configs, while the same words
aimed at the agent still do not. Both offline backends are held to it: the rules
packs alone and ``learned`` (rules + classifier, issue 20).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent.app.config import load_config
from guardrails.learned_model import LearnedDecisionModel
from guardrails.rules import load_packs

DATA = Path(__file__).resolve().parents[1] / "data" / "abuse_ordinary.txt"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
PACK = load_packs()["abusive"]
LEARNED = LearnedDecisionModel()


def _rules(text: str) -> tuple[float, object]:
    value, matched = PACK.score(text)
    return value, matched


def _learned(text: str) -> tuple[float, object]:
    return LEARNED.score("abusive", text)


BACKENDS = pytest.mark.parametrize("score", [_rules, _learned], ids=["rules", "learned"])


def _sentences() -> list[str]:
    lines = DATA.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _lowest_abuse_threshold() -> float:
    thresholds = []
    for path in [None, *sorted((CONFIGS / "agents").glob("*.yaml"))]:
        for check in load_config(path).guardrails.checks:
            for rule in check.rules:
                thresholds += [
                    float(c.value)
                    for c in rule.when
                    if c.name == "abusive" and c.op in (">=", ">") and isinstance(c.value, float)
                ]
    assert thresholds, "no config checks abusive"
    return min(thresholds)


def test_the_regression_set_has_fifty_different_sentences() -> None:
    sentences = _sentences()
    assert len(sentences) == 50
    assert len(set(sentences)) == 50


@BACKENDS
@pytest.mark.parametrize("text", _sentences())
def test_an_ordinary_sentence_stays_below_every_abuse_threshold(
    score: Callable[[str], tuple[float, object]], text: str
) -> None:
    value, detail = score(text)
    assert value < _lowest_abuse_threshold(), f"{value:.2f} {detail}"


@pytest.mark.parametrize(
    ("ordinary", "abusive"),
    [
        ("my idiot brother used my card", "you idiot, you used my card"),
        ("can you believe this idiot landlord", "can you believe it, you idiot"),
        ("can you send it to my moron of an ex", "you are a moron"),
        ("you must deal with idiots like my brother", "you must be an idiot"),
        ("hey, can you help me, some asshole stole my wallet", "hey, you asshole"),
        ("shut the fuck up, really? that's amazing", "shut the fuck up"),
        ("piss off, really? it's free?", "piss off, you useless bot"),
        ("you're fucking brilliant, thank you", "you're fucking useless"),
    ],
)
@BACKENDS
def test_the_same_words_aimed_at_the_agent_are_still_abuse(
    score: Callable[[str], tuple[float, object]], ordinary: str, abusive: str
) -> None:
    threshold = _lowest_abuse_threshold()
    assert score(ordinary)[0] < threshold
    assert score(abusive)[0] >= threshold
