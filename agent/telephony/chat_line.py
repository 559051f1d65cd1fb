"""A text channel as a call transport: the same session loop, typed turns instead of speech.

:class:`ChatLine` implements the session's transport (and the ``dial`` /
``run_callee`` side :func:`agent.app.call.run_call` drives) for a text channel.
Each typed line reaches the AgentSession exactly as a final transcript does in
a text-only replay (through :class:`~agent.telephony.sim.io.TranscriptFeedSTT`
and STT turn detection), so the agent, its hooks, guardrails, tools, markers
and history behave as on a phone call. The agent's audio (from the estimate
TTS) "plays" instantly, so a reply is complete as soon as it is generated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from livekit import rtc
from livekit.agents.voice import io

from agent.core import Bus
from agent.core.messages import RemoteHangup
from agent.telephony.protocol import LineCapabilities
from agent.telephony.sim.io import CalleeAudioInput, TranscriptFeedSTT

__all__ = ["ChatLine", "ChatAudioOutput"]


class ChatAudioOutput(io.AudioOutput):
    """An audio sink that plays everything at once (a text channel has no playback time)."""

    def __init__(self, *, sample_rate: int | None = None) -> None:
        super().__init__(
            label="chat",
            capabilities=io.AudioOutputCapabilities(pause=False),
            sample_rate=sample_rate,
        )
        self._pushed = 0.0
        self._started = False

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self._started:
            self._started = True
            self._pushed = 0.0
            self.on_playback_started(created_at=asyncio.get_running_loop().time())
        self._pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        self._finish(interrupted=False)

    def clear_buffer(self) -> None:
        self._finish(interrupted=True)

    def _finish(self, *, interrupted: bool) -> None:
        if not self._started:
            return
        self._started = False
        self.on_playback_finished(playback_position=self._pushed, interrupted=interrupted)


class ChatLine:
    """One text conversation as a line: typed turns in, the agent's turns out (on the bus).

    Args:
        bus: the call bus.
        stt: the transcript feed the session's AgentSession listens to.
        next_input: returns the next typed line, or None when the other side leaves.
        sample_rate: the session's audio rate.
    """

    def __init__(
        self,
        *,
        bus: Bus,
        stt: TranscriptFeedSTT,
        next_input: Callable[[], Awaitable[str | None]],
        sample_rate: int = 16000,
    ) -> None:
        self.bus = bus
        self.sample_rate = sample_rate
        #: what this line can do (agent.telephony.protocol)
        self.capabilities = LineCapabilities(sample_rate=sample_rate, transfer=True)
        self.feed = stt
        self._next_input = next_input
        self.audio_input = CalleeAudioInput(sample_rate=sample_rate)
        self.audio_output = ChatAudioOutput(sample_rate=sample_rate)
        self._dtmf_handler: Callable[[str], None] | None = None
        self._hangup_handler: Callable[[], None] | None = None
        self.ended_by: str | None = None
        self.transferred_to: str | None = None
        self.dtmf_sent = ""
        self._ended = asyncio.Event()

    # -- the session's transport ----------------------------------------------

    def set_dtmf_handler(self, handler: Callable[[str], None]) -> None:
        self._dtmf_handler = handler

    def set_hangup_handler(self, handler: Callable[[], None]) -> None:
        self._hangup_handler = handler

    def add_audio_tap(self, tap: Callable[[float, Any], None]) -> None:
        return None  # no callee audio on a text channel

    async def send_dtmf(self, digits: str) -> None:
        self.dtmf_sent += digits

    async def hang_up(self) -> None:
        self._end("agent")

    async def transfer(self, destination: str) -> None:
        self.transferred_to = destination
        self._end("transfer")

    def _end(self, by: str) -> None:
        if self.ended_by is None:
            self.ended_by = by
        self.audio_input.close()
        self._ended.set()

    # -- what run_call drives ---------------------------------------------------

    async def dial(self) -> str:
        return "answered"

    def mark_answered(self) -> None:
        return None

    def press(self, digits: str) -> None:
        """The other side typed keypad digits."""
        if self._dtmf_handler is not None:
            self._dtmf_handler(digits)

    async def run_callee(self) -> None:
        """Deliver typed lines as turns until the other side leaves or the agent ends the call."""
        loop = asyncio.get_running_loop()
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            while not self._ended.is_set():
                nxt = asyncio.ensure_future(self._next_input())
                done, _ = await asyncio.wait({nxt, ended}, return_when=asyncio.FIRST_COMPLETED)
                if nxt not in done:
                    nxt.cancel()
                    await asyncio.gather(nxt, return_exceptions=True)
                    return
                text = nxt.result()
                if text is None:
                    self._end("callee")
                    if self._hangup_handler is not None:
                        self._hangup_handler()
                    else:
                        self.bus.publish(RemoteHangup(call_id=self.bus.call_id, at=loop.time()))
                    return
                if text.strip():
                    self.feed.speech_started()
                    self.feed.final_transcript(text.strip())
                    self.feed.speech_ended()
        finally:
            ended.cancel()
            await asyncio.gather(ended, return_exceptions=True)

    async def aclose(self) -> None:
        self._end(self.ended_by or "closed")
