"""The line protocol: what the session and the composition root need from a line.

A line is the simulator, a LiveKit room's SIP leg, or a text channel. Each
declares what it can do in :attr:`Line.capabilities` (as livekit's
``AudioOutput.can_pause`` does); callers read the declaration and never probe a
line for methods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from livekit.agents.voice import io

__all__ = ["Line", "LineCapabilities"]


@dataclass(frozen=True)
class LineCapabilities:
    """What a line can do beyond the basics every line has (DTMF, hang-up, audio io).

    Attributes:
        sample_rate: the rate of the callee audio the line delivers, in Hz.
        audio_tap: :meth:`Line.add_audio_tap` delivers the callee's frames (AMD's tone
            listener needs them; a text channel has none).
        transfer: ``async transfer(destination)`` hands the call over (cold).
        warm_transfer: ``warm_transfer_task(destination, chat_ctx)`` returns livekit's
            warm-transfer task (a LiveKit room).
        attach: ``async attach(session)`` wires the line to the ``AgentSession`` itself
            (a LiveKit room's RoomIO) before its io is used.
        callee_audio_end: ``callee_audio_end(before)`` knows when the callee's audio
            truly ended (the simulator): the origin of a turn's latency; otherwise the
            VAD's end of speech is.
    """

    sample_rate: int = 16000
    audio_tap: bool = False
    transfer: bool = False
    warm_transfer: bool = False
    attach: bool = False
    callee_audio_end: bool = False


class Line(Protocol):
    """What the session needs from a phone line (the simulator, a LiveKit room, a chat)."""

    audio_input: io.AudioInput
    audio_output: io.AudioOutput

    @property
    def capabilities(self) -> LineCapabilities:
        """What this line can do (read it; do not probe the line for methods)."""
        ...

    def set_dtmf_handler(self, handler: Callable[[str], None]) -> None: ...

    def set_hangup_handler(self, handler: Callable[[], None]) -> None: ...

    def add_audio_tap(self, tap: Callable[[float, Any], None]) -> None:
        """Call ``tap(loop time, float32 samples)`` with every callee frame after the answer
        (a no-op unless ``capabilities.audio_tap``)."""
        ...

    async def send_dtmf(self, digits: str) -> None: ...

    async def hang_up(self) -> None: ...
