"""The AMD actor hands the detector every interim reading of an utterance with its final."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.core.bus import Bus
from agent.core.messages import CallAnswered, CallEnded, UserSpeechStarted, UserTranscript
from amd import actor as amd_actor
from amd.actor import AmdActor


def _transcripts(
    texts: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, tuple[str, ...]]]:
    seen: list[tuple[str, tuple[str, ...]]] = []

    async def run() -> None:
        amd = AmdActor(call_id="c1", bus=Bus("c1"))

        def spy(t: float, text: str, readings: Any = ()) -> list[Any]:
            seen.append((text, tuple(readings)))
            return []

        monkeypatch.setattr(amd.detector, "transcript", spy)
        await amd.receive(CallAnswered(call_id="c1", at=0.0))
        await amd.receive(UserSpeechStarted(call_id="c1", at=0.2))
        for text, final in texts:
            await amd.receive(UserTranscript(call_id="c1", turn_id="t", text=text, final=final))

    asyncio.run(run())
    return seen


def test_each_final_gets_the_distinct_interims_of_its_own_utterance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _transcripts(
        [
            ("The mobile phone", False),
            ("The mobile phone you are calling is switched off", False),
            ("The mobile phone you are calling is switched off", False),
            ("The moment for new economy.", False),
            ("The moment for new economy is reached.", True),
            ("Please call", False),
            ("Please call later.", True),
        ],
        monkeypatch,
    )
    assert seen == [
        (
            "The moment for new economy is reached.",
            (
                "The mobile phone",
                "The mobile phone you are calling is switched off",
                "The moment for new economy.",
            ),
        ),
        ("Please call later.", ("Please call",)),
    ]


def test_a_long_utterance_keeps_its_latest_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amd_actor, "MAX_READINGS", 3)
    seen = _transcripts([*((f"reading {i}", False) for i in range(6)), ("done", True)], monkeypatch)
    assert seen == [("done", ("reading 3", "reading 4", "reading 5"))]


def test_a_line_closed_before_the_final_transcript_is_read_in_its_interims() -> None:
    """A carrier's announcement ends in a hang-up that can come before the recogniser
    has finished the utterance: what its interims read still decides the call."""
    done: list[Any] = []

    async def run() -> None:
        bus = Bus("c1")
        amd = AmdActor(call_id="c1", bus=bus)
        bus.subscribe("amd_completed", done.append)
        await amd.receive(CallAnswered(call_id="c1", at=0.0))
        await amd.receive(UserSpeechStarted(call_id="c1", at=0.5))
        for text in (
            "The mailbox is full",
            "The mailbox is full and cannot accept any messages at this time.",
        ):
            await amd.receive(UserTranscript(call_id="c1", turn_id="t", text=text, final=False))
        await amd.receive(CallEnded(call_id="c1", disposition="completed", reason="remote hangup"))
        amd.stop()

    asyncio.run(run())
    (completed,) = done
    assert completed.category == "machine-unavailable"
