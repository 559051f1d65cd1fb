"""The LiveKit line's own logic, with a fake room and fake server API (no LiveKit server)."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from livekit import rtc
from livekit.agents.voice import io

from agent.app.config import DEFAULT_CONFIG
from agent.app.worker import caller_of, config_for_job, job_of
from agent.core import clock
from agent.telephony.livekit.api import DialJob, DialResult
from agent.telephony.livekit.line import DTMF_CODES, LiveKitLine, TappedAudioInput, call_is_active


class FakeParticipant:
    def __init__(self, identity: str, attributes: dict[str, str] | None = None) -> None:
        self.identity = identity
        self.attributes = attributes or {}


class FakeLocal:
    def __init__(self) -> None:
        self.dtmf: list[tuple[int, str]] = []

    async def publish_dtmf(self, *, code: int, digit: str) -> None:
        self.dtmf.append((code, digit))


class FakeRoom:
    def __init__(self) -> None:
        self.name = "call-1"
        self.handlers: dict[str, list[Any]] = {}
        self.remote_participants: dict[str, FakeParticipant] = {}
        self.local_participant = FakeLocal()

    def on(self, event: str, handler: Any) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def emit(self, event: str, *args: Any) -> None:
        for h in self.handlers.get(event, []):
            h(*args)


class FakeTelephony:
    def __init__(self, status: str = "answered") -> None:
        self.status = status
        self.calls: list[tuple[str, ...]] = []

    async def dial(self, room: str, number: str, *, identity: str, caller_id: Any = None) -> Any:
        self.calls.append(("dial", room, number, identity))
        return DialResult(status=self.status, participant_identity=identity)  # type: ignore[arg-type]

    async def transfer(self, room: str, identity: str, to: str) -> None:
        self.calls.append(("transfer", room, identity, to))

    async def hang_up(self, room: str) -> None:
        self.calls.append(("hang_up", room))


def _line(job: DialJob | None = None, status: str = "answered") -> tuple[LiveKitLine, Any, Any]:
    room, api = FakeRoom(), FakeTelephony(status)
    line = LiveKitLine(
        room=room,  # type: ignore[arg-type]
        telephony=api,  # type: ignore[arg-type]
        job=job,
        participant_identity="callee-1",
    )
    return line, room, api


@pytest.mark.parametrize(
    ("attributes", "active"),
    [
        ({}, True),
        ({"sip.callStatus": "active"}, True),
        ({"sip.callStatus": "dialing"}, False),
        ({"sip.callStatus": "ringing"}, False),
        ({"sip.callStatus": "hangup"}, False),
    ],
)
def test_only_an_answered_call_counts_as_active(attributes: dict[str, str], active: bool) -> None:
    assert call_is_active(attributes) is active


def test_keypad_digits_use_rfc_4733_codes() -> None:
    assert [DTMF_CODES[d] for d in "0159*#"] == [0, 1, 5, 9, 10, 11]


class Frames(io.AudioInput):
    def __init__(self, n: int) -> None:
        super().__init__(label="frames")
        self.left = n

    async def __anext__(self) -> rtc.AudioFrame:
        if not self.left:
            raise StopAsyncIteration
        self.left -= 1
        data = (np.ones(160, dtype=np.int16) * 1000).tobytes()
        return rtc.AudioFrame(data, sample_rate=16000, num_channels=1, samples_per_channel=160)


def test_amd_taps_hear_nothing_before_the_call_is_answered() -> None:
    status = {"sip.callStatus": "ringing"}
    tapped = TappedAudioInput(Frames(4), lambda: call_is_active(status))
    heard: list[int] = []
    tapped.add_tap(lambda at, samples: heard.append(len(samples)))

    async def main() -> int:
        n = 0
        for i in range(4):
            if i == 2:
                status["sip.callStatus"] = "active"  # the callee picks up
            await tapped.__anext__()
            n += 1
        return n

    assert clock.run(main()) == 4  # every frame still reaches the session
    assert heard == [160, 160]  # only the answered ones reach AMD


def test_outbound_dial_reports_the_answer_status_and_inbound_is_answered() -> None:
    job = DialJob(number="+15551234567")
    line, _, api = _line(job, status="busy")
    assert clock.run(line.dial()) == "busy"
    assert api.calls == [("dial", "call-1", "+15551234567", "callee-1")]
    inbound, _, api2 = _line(None)
    assert clock.run(inbound.dial()) == "answered" and api2.calls == []


def test_dtmf_goes_out_as_keypad_events_and_comes_in_for_this_caller_only() -> None:
    line, room, _ = _line()
    got: list[str] = []
    line.set_dtmf_handler(got.append)
    clock.run(line.send_dtmf("12#"))
    assert room.local_participant.dtmf == [(1, "1"), (2, "2"), (11, "#")]
    assert line.dtmf_sent == "12#"

    class Ev:
        def __init__(self, digit: str, who: str) -> None:
            self.digit, self.participant = digit, FakeParticipant(who)

    room.emit("sip_dtmf_received", Ev("5", "callee-1"))
    room.emit("sip_dtmf_received", Ev("9", "someone-else"))
    assert got == ["5"]


def test_the_callee_leaving_ends_the_line_and_others_do_not() -> None:
    line, room, _ = _line()
    hung: list[bool] = []
    line.set_hangup_handler(lambda: hung.append(True))

    async def main() -> str | None:
        waiting = asyncio.ensure_future(line.run_callee())
        room.emit("participant_disconnected", FakeParticipant("observer"))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        room.emit("participant_disconnected", FakeParticipant("callee-1"))
        await asyncio.wait_for(waiting, 1.0)
        return line.ended_by

    assert clock.run(main()) == "callee" and hung == [True]


def test_transfer_and_hang_up_go_to_the_server() -> None:
    line, _, api = _line()
    clock.run(line.transfer("+15550100200"))
    assert api.calls == [("transfer", "call-1", "callee-1", "+15550100200")]
    assert line.ended_by == "transfer"
    line2, _, api2 = _line()
    clock.run(line2.hang_up())
    assert api2.calls == [("hang_up", "call-1")] and line2.ended_by == "agent"


def test_the_worker_reads_the_caller_and_the_jobs_config(tmp_path: Path) -> None:
    assert caller_of({"sip.phoneNumber": "+15550100999"}) == "+15550100999"
    assert caller_of({}) is None
    config = tmp_path / "agent.yaml"
    config.write_text("name: outbound-x\n")
    assert config_for_job(DialJob(number="+15551234567", agent_config=str(config)), None).name == (
        "outbound-x"
    )
    assert config_for_job(None, DEFAULT_CONFIG).name == "default"


def test_only_metadata_with_a_number_is_an_outbound_job() -> None:
    assert job_of("") is None
    assert job_of('{"room_note": "from the dispatch rule"}') is None
    assert job_of("not json") is None
    job = job_of(DialJob(number="+15551234567", contact_id="c1").to_metadata())
    assert job is not None and job.number == "+15551234567" and job.contact_id == "c1"
    with pytest.raises(ValueError, match="number"):
        job_of('{"number": "555-1234"}')


def test_the_worker_registers_one_session_under_its_agent_name() -> None:
    from agent.app.worker import WorkerState, build_server
    from agent.telephony.livekit.api import LiveKitSettings

    settings = LiveKitSettings(
        url="ws://127.0.0.1:7880", api_key="key", api_secret="secret", agent_name="front-desk"
    )
    state = WorkerState(settings, config_path=None)
    server = build_server(state)
    assert server._agent_name == "front-desk"  # livekit keeps it private; no public getter
    assert server._entrypoint_fnc == state.run_job


@pytest.mark.parametrize(
    ("sip_status", "disposition"),
    [(486, "busy"), (480, "no-answer"), (603, "rejected"), (404, "failed")],
)
async def test_an_unanswered_outbound_call_ends_with_its_disposition(
    sip_status: int, disposition: str
) -> None:
    """run_call over a LiveKit line, the dial going to a fake LiveKit server."""
    from livekit.api import LiveKitAPI

    from agent.app.call import run_call
    from agent.app.config import AgentConfig
    from agent.core import Bus
    from agent.telephony.livekit.api import LiveKitSettings, LiveKitTelephony
    from tests.fakes.twirp_server import FakeLiveKit
    from tests.unit.test_replay_calls import _replayer

    async with FakeLiveKit() as lk:
        lk.fail_next("CreateSIPParticipant", sip_status=sip_status, msg="no")
        api = LiveKitAPI(lk.url, lk.api_key, lk.api_secret)
        settings = LiveKitSettings(
            url=lk.url, api_key=lk.api_key, api_secret=lk.api_secret, sip_trunk_id="ST_out"
        )
        telephony = LiveKitTelephony(settings, api=api)
        line = LiveKitLine(
            room=FakeRoom(),  # type: ignore[arg-type]
            telephony=telephony,
            job=DialJob(number="+15551234567"),
            participant_identity="callee-1",
        )
        bus = Bus("call_lk")
        seen: list[Any] = []
        bus.subscribe(("call_not_answered", "call_ended"), seen.append)
        outcome = await run_call(
            call_id="call_lk",
            bus=bus,
            direction="outbound",
            line=line,
            config=AgentConfig(),
            models=_replayer().models(),
        )
        await telephony.aclose()
        await api.aclose()
        (dialled,) = lk.messages("CreateSIPParticipant")
    assert outcome.disposition == disposition
    assert dialled.sip_call_to == "+15551234567" and dialled.wait_until_answered
    assert [m.kind for m in seen] == ["call_not_answered", "call_ended"]


def test_each_line_declares_what_it_can_do() -> None:
    """Lines declare their capabilities; the session and run_call read them, never probe."""
    from agent.telephony.chat_line import ChatLine
    from agent.telephony.livekit.line import LiveKitLine
    from agent.telephony.protocol import LineCapabilities
    from agent.telephony.sim.simulator import CallSimulator

    for line_class in (CallSimulator, LiveKitLine, ChatLine):
        # every capability a line declares is backed by the method it names
        source = inspect.getsource(line_class)
        assert "self.capabilities = LineCapabilities(" in source, line_class
    checks = {
        "transfer": "async def transfer(",
        "warm_transfer": "def warm_transfer_task(",
        "attach": "async def attach(",
        "callee_audio_end": "def callee_audio_end(",
    }
    declared = {
        CallSimulator: {"audio_tap", "transfer", "callee_audio_end"},
        LiveKitLine: {"audio_tap", "transfer", "warm_transfer", "attach"},
        ChatLine: {"transfer"},
    }
    for line_class, names in declared.items():
        for name, method in checks.items():
            assert (method in inspect.getsource(line_class)) == (name in names), (line_class, name)
    assert LineCapabilities() == LineCapabilities(
        sample_rate=16000,
        audio_tap=False,
        transfer=False,
        warm_transfer=False,
        attach=False,
        callee_audio_end=False,
    )
