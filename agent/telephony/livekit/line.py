"""A phone call in a LiveKit room as the session's transport (LiveKit SIP).

:class:`LiveKitLine` is what :func:`agent.app.call.run_call` drives in production:
``dial()`` places the outbound SIP call (``create_sip_participant`` with
``wait_until_answered``) or, inbound, waits for the SIP participant the
dispatch rule put in the room; :meth:`attach` wires the AgentSession to the
room through livekit's public ``RoomIO`` (audio in and out for that one
participant); DTMF goes out with ``publish_dtmf`` and comes in from
``sip_dtmf_received``; ``transfer`` is a cold SIP transfer; ``hang_up`` deletes
the room, which ends every leg.

AMD listens through :meth:`add_audio_tap`. Taps see a frame only once the SIP
participant's ``sip.callStatus`` attribute is ``active``: ringback and early
media (which LiveKit may forward before the answer) never reach AMD.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents.voice import io

from agent.core.messages import AnswerStatus
from agent.telephony.audio import from_int16
from agent.telephony.livekit.api import DialJob, LiveKitTelephony
from agent.telephony.phone import mask_number
from agent.telephony.protocol import LineCapabilities

logger = logging.getLogger("agent.telephony.livekit")

__all__ = ["LiveKitLine", "TappedAudioInput", "DTMF_CODES", "call_is_active"]

#: RFC 4733 event codes for the keypad
DTMF_CODES: dict[str, int] = {**{str(d): d for d in range(10)}, "*": 10, "#": 11}
DTMF_CODES.update({"A": 12, "B": 13, "C": 14, "D": 15})

CALL_STATUS = "sip.callStatus"


def call_is_active(attributes: dict[str, str]) -> bool:
    """Whether a participant's attributes say its call is answered (not ringing, not over).

    A participant without the attribute (not a SIP leg, or an older server) counts
    as active: its media is the call.
    """
    status = attributes.get(CALL_STATUS)
    return status is None or status == "active"


class TappedAudioInput(io.AudioInput):
    """Forwards a room audio input's frames and shows them to taps while the call is active."""

    def __init__(self, source: io.AudioInput, active: Callable[[], bool]) -> None:
        super().__init__(label="tapped", source=source)
        self._active = active
        self._taps: list[Callable[[float, np.ndarray], None]] = []

    def add_tap(self, tap: Callable[[float, np.ndarray], None]) -> None:
        self._taps.append(tap)

    async def __anext__(self) -> rtc.AudioFrame:
        frame = await self.source.__anext__()  # type: ignore[union-attr]
        if self._taps and self._active():
            samples = from_int16(np.frombuffer(bytes(frame.data), dtype=np.int16))
            if frame.num_channels > 1:
                samples = samples.reshape(-1, frame.num_channels).mean(axis=1)
            now = asyncio.get_running_loop().time()
            for tap in self._taps:
                tap(now, samples)
        return frame


class LiveKitLine:
    """One call's leg in a LiveKit room.

    Args:
        room: the connected room (the job's).
        telephony: the server API (dial, transfer, delete the room).
        job: the outbound dial job (None for an inbound call).
        participant_identity: the SIP participant's identity (inbound: the caller's;
            outbound: the identity to give the callee's leg).
        sample_rate: the session's audio rate.
    """

    def __init__(
        self,
        *,
        room: rtc.Room,
        telephony: LiveKitTelephony,
        job: DialJob | None,
        participant_identity: str,
        sample_rate: int = 16000,
    ) -> None:
        self.room = room
        self.telephony = telephony
        self.job = job
        self.identity = participant_identity
        self.sample_rate = sample_rate
        #: what this line can do (agent.telephony.protocol)
        self.capabilities = LineCapabilities(
            sample_rate=sample_rate, audio_tap=True, transfer=True, warm_transfer=True, attach=True
        )
        self.audio_input: io.AudioInput
        self.audio_output: io.AudioOutput
        self._room_io: Any = None
        self._taps: list[Callable[[float, np.ndarray], None]] = []
        self._dtmf_handler: Callable[[str], None] | None = None
        self._hangup_handler: Callable[[], None] | None = None
        self._gone = asyncio.Event()
        self.ended_by: str | None = None
        self.dtmf_sent = ""
        room.on("participant_disconnected", self._on_disconnected)
        room.on("sip_dtmf_received", self._on_dtmf)

    # -- what run_call drives ---------------------------------------------------

    async def dial(self) -> AnswerStatus:
        """Outbound: place the call and wait for the answer. Inbound: the caller is here."""
        if self.job is None:
            return "answered"
        result = await self.telephony.dial(
            self.room.name, self.job.number, identity=self.identity, caller_id=self.job.caller_id
        )
        logger.info(
            "outbound call",
            extra={"number": mask_number(self.job.number), "status": result.status},
        )
        return result.status

    def mark_answered(self) -> None:
        return None

    async def run_callee(self) -> None:
        """The far end is a person on the phone: wait until their leg leaves the room."""
        await self._gone.wait()

    async def attach(self, session: Any) -> None:
        """Connect the AgentSession to the room for this participant (livekit's RoomIO)."""
        from livekit.agents.voice.room_io import RoomIO, RoomOptions

        room_io = RoomIO(
            session,
            self.room,
            participant=self.identity,
            options=RoomOptions(close_on_disconnect=False),
        )
        await room_io.start()
        self._room_io = room_io
        if room_io.audio_input is None or room_io.audio_output is None:
            raise RuntimeError("the room has no audio input or output for the call")
        tapped = TappedAudioInput(room_io.audio_input, self._call_active)
        for tap in self._taps:
            tapped.add_tap(tap)
        self.audio_input = tapped
        self.audio_output = room_io.audio_output

    def _call_active(self) -> bool:
        p = self.room.remote_participants.get(self.identity)
        return p is not None and call_is_active(dict(p.attributes))

    # -- the session's transport ------------------------------------------------

    def set_dtmf_handler(self, handler: Callable[[str], None]) -> None:
        self._dtmf_handler = handler

    def set_hangup_handler(self, handler: Callable[[], None]) -> None:
        self._hangup_handler = handler

    def add_audio_tap(self, tap: Callable[[float, np.ndarray], None]) -> None:
        self._taps.append(tap)
        if isinstance(getattr(self, "audio_input", None), TappedAudioInput):
            self.audio_input.add_tap(tap)  # type: ignore[attr-defined]

    async def send_dtmf(self, digits: str) -> None:
        for digit in digits:
            code = DTMF_CODES.get(digit.upper())
            if code is None:
                continue
            await self.room.local_participant.publish_dtmf(code=code, digit=digit)
            self.dtmf_sent += digit
            await asyncio.sleep(0.1)  # inter-digit gap, like a keypad

    async def transfer(self, destination: str) -> None:
        await self.telephony.transfer(self.room.name, self.identity, destination)
        self.ended_by = "transfer"
        self._gone.set()

    def warm_transfer_task(self, destination: str, chat_ctx: Any) -> Any:
        """livekit's WarmTransferTask to ``destination`` (awaited inside the transfer tool)."""
        from livekit.agents.beta.workflows.warm_transfer import WarmTransferTask

        settings = self.telephony.settings
        return WarmTransferTask(
            sip_call_to=destination.removeprefix("tel:"),
            sip_trunk_id=settings.sip_trunk_id or None,
            ringing_timeout=settings.ringing_timeout,
            chat_ctx=chat_ctx,
        )

    async def hang_up(self) -> None:
        if self.ended_by is None:
            self.ended_by = "agent"
        await self.telephony.hang_up(self.room.name)
        self._gone.set()

    # -- room events ---------------------------------------------------------------

    def _on_disconnected(self, participant: rtc.RemoteParticipant) -> None:
        if participant.identity != self.identity or self._gone.is_set():
            return
        self.ended_by = self.ended_by or "callee"
        self._gone.set()
        if self._hangup_handler is not None:
            self._hangup_handler()

    def _on_dtmf(self, ev: rtc.SipDTMF) -> None:
        participant = getattr(ev, "participant", None)
        if participant is not None and participant.identity != self.identity:
            return
        if self._dtmf_handler is not None and ev.digit:
            self._dtmf_handler(ev.digit)

    async def aclose(self) -> None:
        if self._room_io is not None:
            await self._room_io.aclose()
