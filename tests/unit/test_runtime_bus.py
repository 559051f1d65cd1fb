"""The per-call bus: fan-out by kind, actor subscribers, failing subscribers."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agent.core import ALL, Actor, Bus, CallScope, run
from agent.core.messages import (
    CallAnswered,
    CallEnded,
    DtmfReceived,
    Message,
    Say,
    UserSpeechStarted,
    UserSpeechStopped,
)

CALL = "call_test"


def timeline() -> list[Message]:
    return [
        CallAnswered(call_id=CALL, at=0.0),
        UserSpeechStarted(call_id=CALL, at=0.5),
        DtmfReceived(call_id=CALL, at=1.0, digits="1"),
        UserSpeechStopped(call_id=CALL, at=2.5),
        UserSpeechStarted(call_id=CALL, at=3.0),
        DtmfReceived(call_id=CALL, at=3.5, digits="2"),
        CallEnded(call_id=CALL, at=4.0, disposition="completed", reason="done"),
    ]


class Listener(Actor):
    """Records what reaches it through its mailbox."""

    def __init__(self, name: str = "listener", *, capacity: int = 256) -> None:
        super().__init__(name, capacity=capacity)
        self.received: list[Message] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def receive(self, msg: Any) -> None:
        await self.gate.wait()
        self.received.append(msg)


def test_subscribers_get_their_kinds_and_star_gets_everything_in_publish_order() -> None:
    bus = Bus(CALL)
    speech: list[str] = []
    dtmf: list[str] = []
    everything: list[Message] = []
    bus.subscribe(["user_speech_started", "user_speech_stopped"], lambda m: speech.append(m.kind))
    bus.subscribe("dtmf_received", lambda m: dtmf.append(m.digits))
    bus.subscribe(ALL, everything.append)
    msgs = timeline()
    for msg in msgs:
        bus.publish(msg)
    assert speech == ["user_speech_started", "user_speech_stopped", "user_speech_started"]
    assert dtmf == ["1", "2"]
    assert everything == msgs
    assert bus.published == len(msgs)


def test_publishing_a_kind_nobody_listens_to_is_fine() -> None:
    bus = Bus(CALL)
    bus.publish(CallAnswered(call_id=CALL))
    assert bus.published == 1


def test_an_actor_subscriber_receives_through_its_mailbox() -> None:
    async def main() -> None:
        bus = Bus(CALL)
        listener = Listener()
        async with CallScope(CALL) as scope:
            scope.start_actor(listener)
            bus.subscribe(["user_speech_started", "dtmf_received"], listener)
            listener.gate.clear()
            for msg in timeline():
                bus.publish(msg)
            # publish never waits for the actor: nothing handled yet.
            assert listener.received == []
            listener.gate.set()
            await asyncio.sleep(1)
            await scope.shutdown()
        assert [m.kind for m in listener.received] == [
            "user_speech_started",
            "dtmf_received",
            "user_speech_started",
            "dtmf_received",
        ]
        assert [m.at for m in listener.received] == [0.5, 1.0, 3.0, 3.5]

    run(main())


def test_a_raising_subscriber_keeps_receiving_is_reported_and_breaks_nobody(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: a raising subscriber used to be dropped silently after one error."""
    bus = Bus(CALL)
    before: list[str] = []
    after: list[str] = []
    calls: list[str] = []

    def broken(msg: Message) -> None:
        calls.append(msg.kind)
        raise RuntimeError("subscriber bug")

    bus.subscribe(ALL, before.append)
    bus.subscribe(["user_speech_started", "dtmf_received"], broken)
    bus.subscribe("user_speech_started", lambda m: after.append(m.kind))
    bus.subscribe(ALL, lambda m: after.append(m.kind))
    with caplog.at_level(logging.ERROR, logger="agent.core"):
        for msg in timeline():
            bus.publish(msg)  # never raises
    wanted = [m.kind for m in timeline() if m.kind in ("user_speech_started", "dtmf_received")]
    assert calls == wanted  # still subscribed: it gets every later message
    assert len(before) == len(timeline())
    assert after.count("user_speech_started") == 4
    assert len(after) == len(timeline()) + 2
    [failure] = bus.failures
    assert failure.kind == "user_speech_started"
    assert failure.error == "RuntimeError: subscriber bug"
    assert failure.count == len(wanted)
    assert "broken" in failure.subscriber
    logged = [r for r in caplog.records if "subscriber failed" in r.getMessage()]
    assert len(logged) == 1  # once, with its traceback; the count says the rest
    assert logged[0].exc_info is not None


def test_cancel_unsubscribes_from_every_kind_of_the_subscription() -> None:
    bus = Bus(CALL)
    got: list[str] = []
    others: list[str] = []
    sub = bus.subscribe(["user_speech_started", "dtmf_received"], lambda m: got.append(m.kind))
    bus.subscribe("dtmf_received", lambda m: others.append(m.kind))
    bus.publish(UserSpeechStarted(call_id=CALL))
    sub.cancel()
    sub.cancel()  # cancelling twice is harmless
    bus.publish(UserSpeechStarted(call_id=CALL))
    bus.publish(DtmfReceived(call_id=CALL, digits="5"))
    assert got == ["user_speech_started"]
    assert others == ["dtmf_received"]


def test_a_subscriber_may_cancel_itself_while_being_called() -> None:
    bus = Bus(CALL)
    got: list[str] = []
    later: list[str] = []

    def once(msg: Message) -> None:
        got.append(msg.kind)
        sub.cancel()

    sub = bus.subscribe(ALL, once)
    bus.subscribe(ALL, lambda m: later.append(m.kind))
    bus.publish(CallAnswered(call_id=CALL))
    bus.publish(CallAnswered(call_id=CALL))
    assert got == ["call_answered"]
    assert later == ["call_answered", "call_answered"]


def test_publishing_to_a_stopped_actor_is_skipped() -> None:
    async def main() -> None:
        bus = Bus(CALL)
        gone = Listener("gone")
        got: list[str] = []
        async with CallScope(CALL) as scope:
            scope.start_actor(gone)
            bus.subscribe(ALL, gone)
            bus.subscribe(ALL, lambda m: got.append(m.kind))
            await asyncio.sleep(1)
            await scope.shutdown()
        for msg in timeline():
            bus.publish(msg)  # the stopped actor is skipped, no error
        assert gone.received == []
        assert len(got) == len(timeline())

    run(main())


def test_an_actor_with_a_full_mailbox_misses_the_message_but_stays_subscribed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        bus = Bus(CALL)
        slow = Listener("slow", capacity=1)
        async with CallScope(CALL) as scope:
            scope.start_actor(slow)
            bus.subscribe(ALL, slow)
            slow.gate.clear()
            bus.publish(Say(call_id=CALL, text="first"))  # taken by the handler
            await asyncio.sleep(0.001)
            bus.publish(Say(call_id=CALL, text="second"))  # fills the lane
            with caplog.at_level(logging.WARNING, logger="agent.core"):
                bus.publish(Say(call_id=CALL, text="dropped"))
            slow.gate.set()
            await asyncio.sleep(1)
            bus.publish(Say(call_id=CALL, text="third"))
            # Urgent kinds always get through.
            bus.publish(CallEnded(call_id=CALL, disposition="completed", reason="done"))
            await asyncio.sleep(1)
            await scope.shutdown()
        texts = [getattr(m, "text", m.kind) for m in slow.received]
        assert texts == ["first", "second", "third", "call_ended"]
        assert [(f.subscriber, f.kind, f.count) for f in bus.failures] == [("actor slow", "say", 1)]

    run(main())
