"""The simulated carrier and callee, driven by a recorded call.

:class:`CallSimulator` is a :class:`~agent.telephony.protocol.Line`: it rings,
answers (or not) as the call's ``answer`` says, plays the callee's segments
into the session's audio input when their triggers fire, "plays" the agent's
audio in loop time, records both sides, and reports DTMF and hang-ups.

Segment timing follows ``RECORDED_CALLS.md``: ``at`` is absolute after the
answer; ``after`` triggers count from the end of the previous segment, plus
``gap``; ``timeout`` fires an ``after`` segment anyway that long after the
previous segment ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.core import Bus
from agent.core.messages import AgentSpeechStarted, AgentTurnCompleted, DtmfSent, RemoteHangup
from agent.telephony.audio import load_audio
from agent.telephony.line import LineModel
from agent.telephony.protocol import LineCapabilities
from agent.telephony.sim.io import AgentAudioOutput, CalleeAudioInput, TranscriptFeedSTT
from agent.telephony.sim.recorded_call import (
    AfterTrigger,
    AtTrigger,
    AudioPayload,
    DtmfPayload,
    HangupPayload,
    RecordedCall,
    SayPayload,
    Segment,
    SilencePayload,
    TonePayload,
    estimated_speech_seconds,
)
from agent.telephony.sim.recording import StereoRecorder
from agent.telephony.sim.tones import dtmf_tones, silence, tone

logger = logging.getLogger("agent.simulator")

__all__ = ["CallSimulator", "LineSynth", "PreparedSegment", "SpeechSynth"]

SpeechSynth = Callable[[str, int], np.ndarray]
#: the synthesiser of one ``say`` line, given the line's own ``voice`` (None: it names none)
LineSynth = Callable[[str | None], SpeechSynth]
#: Text-only replays deliver an interim transcript this long after the callee starts.
INTERIM_AFTER = 0.4


@dataclass
class PreparedSegment:
    """One callee segment with its audio rendered (through the line model)."""

    index: int
    trigger: str  # at | previous | agent_turn | agent_speech_start | dtmf
    at: float | None
    gap: float
    timeout: float | None
    digits: str | None
    payload: str  # say | audio | tone | silence | dtmf | hangup
    text: str | None = None
    dtmf: str | None = None
    audio: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    seconds: float = 0.0
    #: seconds of quiet at the end of the audio (synthesisers append up to ~0.4 s)
    quiet_tail: float = 0.0


@dataclass
class _Observed:
    """Agent events the triggers wait for, as (loop time, value)."""

    speech_starts: list[float] = field(default_factory=list)
    turn_ends: list[tuple[float, bool]] = field(default_factory=list)  # (time, interrupted)
    dtmf: list[tuple[float, str]] = field(default_factory=list)


class CallSimulator:
    """A carrier plus a callee that follows a recorded call.

    Args:
        call: the recorded call.
        bus: the call bus (the simulator listens for agent events and publishes hang-ups).
        text_only: deliver ``say`` texts as transcripts instead of audio.
        synth: renders ``say`` texts without audio (the offline TTS, cached).
        line_synth: picks the synthesiser of each ``say`` line from its ``voice``
            (the replay's voice choice); ``synth`` is used when not given.
        sample_rate: rate of the audio handed to the session.
        feed_stt: the transcript feed STT (text-only replays).
        record: keep a stereo recording (callee left, agent right).
    """

    def __init__(
        self,
        call: RecordedCall,
        *,
        bus: Bus,
        text_only: bool,
        synth: SpeechSynth | None = None,
        line_synth: LineSynth | None = None,
        sample_rate: int = 16000,
        feed_stt: TranscriptFeedSTT | None = None,
        record: bool = False,
    ) -> None:
        self.call = call
        self.bus = bus
        self.text_only = text_only
        self.sample_rate = sample_rate
        #: what this line can do (agent.telephony.protocol)
        self.capabilities = LineCapabilities(
            sample_rate=sample_rate, audio_tap=True, transfer=True, callee_audio_end=True
        )
        self.feed_stt = feed_stt
        self._synth = synth
        self._line_synth = line_synth
        line = call.line
        self._line = (
            LineModel(sample_rate=line.sample_rate, codec=line.codec, noise_db=None)
            if line is not None
            else None
        )
        self._noise_level = (
            10 ** (line.noise_db / 20) if line is not None and line.noise_db is not None else None
        )
        self._rng = np.random.default_rng(0)
        self.recorder = StereoRecorder(sample_rate) if record else None
        self.answered_at: float | None = None
        self.audio_input = CalleeAudioInput(
            sample_rate=sample_rate,
            noise=self._noise if self._noise_level is not None else None,
            on_frame=self._on_callee_frame,
        )
        self._taps: list[Callable[[float, np.ndarray], None]] = []
        self.audio_output = AgentAudioOutput(on_played=self._record_agent if record else None)
        self.segments: list[PreparedSegment] = []
        self.dtmf_sent = ""
        self.hung_up_by: str | None = None
        self.transferred_to: str | None = None
        #: (payload, start, end) in loop time for every segment played: ground truth
        #: for measuring how fast the agent answers
        self.played: list[tuple[str, float, float]] = []
        #: when the voice of each speech segment played (say, audio) ended, in loop
        #: time: its end less the quiet its audio ends with
        self.voice_ends: list[float] = []
        self._dtmf_handler: Callable[[str], None] | None = None
        self._hangup_handler: Callable[[], None] | None = None
        self._observed = _Observed()
        self._changed = asyncio.Event()
        self._subs = [
            bus.subscribe("agent_speech_started", self._on_agent_event),
            bus.subscribe("agent_turn_completed", self._on_agent_event),
            bus.subscribe("dtmf_sent", self._on_agent_event),
        ]

    # -- preparation -------------------------------------------------------

    def prepare(self) -> None:
        """Render every segment's audio. Blocking (TTS, file I/O): run it in an executor."""
        self.segments = [self._prepare(i, seg) for i, seg in enumerate(self.call.callee)]

    def _prepare(self, index: int, seg: Segment) -> PreparedSegment:
        sr = self.sample_rate
        match seg.trigger:
            case AtTrigger(seconds=at):
                p = PreparedSegment(index, "at", at, 0.0, None, None, "")
            case AfterTrigger(event=event, gap=gap, timeout=timeout, digits=digits):
                p = PreparedSegment(index, str(event.value), None, gap, timeout, digits, "")
        audio: np.ndarray | None = None
        match seg.payload:
            case SayPayload(text=text, audio=path, voice=voice):
                p.payload, p.text = "say", text
                if path is not None:
                    audio = load_audio(path, sr)
                elif not self.text_only:
                    synth = self._line_synth(voice) if self._line_synth else self._synth
                    if synth is None:
                        raise RuntimeError("replaying `say` with audio needs a speech synthesiser")
                    audio = synth(text, sr)
                p.seconds = len(audio) / sr if audio is not None else estimated_speech_seconds(text)
                if self.text_only:
                    audio = None  # text-only: the transcript stands for the speech
            case AudioPayload(path=path):
                p.payload = "audio"
                audio = load_audio(path, sr)
            case TonePayload(hz=hz, seconds=seconds, level_db=level_db):
                p.payload = "tone"
                audio = tone(list(hz), seconds, sr, level_db=level_db)
            case SilencePayload(seconds=seconds):
                p.payload = "silence"
                audio = silence(seconds, sr)
            case DtmfPayload(digits=digits):
                p.payload, p.dtmf = "dtmf", digits
                audio = dtmf_tones(digits, sr)
            case HangupPayload():
                p.payload = "hangup"
        if audio is not None:
            if self._line is not None:
                audio = self._line.apply(audio, sr)
            p.audio = audio.astype(np.float32, copy=False)
            if p.payload != "say":
                p.seconds = len(p.audio) / sr
            if p.payload in ("say", "audio"):
                p.quiet_tail = min(p.seconds, _quiet_tail(p.audio, sr))
        return p

    # -- transport ---------------------------------------------------------

    def set_dtmf_handler(self, handler: Callable[[str], None]) -> None:
        self._dtmf_handler = handler

    def add_audio_tap(self, tap: Callable[[float, np.ndarray], None]) -> None:
        """Call ``tap(loop time, float32 samples)`` with every callee frame (AMD listens here)."""
        self._taps.append(tap)

    def set_hangup_handler(self, handler: Callable[[], None]) -> None:
        self._hangup_handler = handler

    def callee_audio_end(self, before: float) -> float | None:
        """When the callee's last speech that had finished by ``before`` (loop time) ended.

        The simulator plays the callee's audio itself, so it knows the true end of each
        line: the origin of a reply's latency (the session's VAD only estimates it).
        """
        ends = [end for payload, _, end in self.played if payload in ("say", "audio")]
        done = [end for end in ends if end <= before]
        return done[-1] if done else None

    async def send_dtmf(self, digits: str) -> None:
        self.dtmf_sent += digits
        if self.recorder is not None and self.answered_at is not None:
            now = asyncio.get_running_loop().time()
            self.recorder.add("agent", now - self.answered_at, dtmf_tones(digits, self.sample_rate))

    async def hang_up(self) -> None:
        if self.hung_up_by is None:
            self.hung_up_by = "agent"
        self.audio_input.close()

    async def transfer(self, destination: str) -> None:
        """Hand the call over: the recorded callee's script ends here, as after a hang-up."""
        self.transferred_to = destination
        if self.hung_up_by is None:
            self.hung_up_by = "transfer"
        self.audio_input.close()

    async def dial(self) -> str:
        """Ring as the call says; returns the answer status."""
        answer = self.call.answer
        if self.call.direction == "outbound" and answer.after > 0:
            await asyncio.sleep(answer.after)
        return answer.status if self.call.direction == "outbound" else "answered"

    def mark_answered(self) -> None:
        self.answered_at = asyncio.get_running_loop().time()

    # -- the callee --------------------------------------------------------

    async def run_callee(self) -> None:
        """Play the segments in order as their triggers fire (until a hang-up or the end)."""
        loop = asyncio.get_running_loop()
        assert self.answered_at is not None, "mark_answered() first"
        prev_end = self.answered_at
        for seg in self.segments:
            await self._wait_trigger(seg, prev_end)
            if self.hung_up_by is not None:
                return
            if seg.payload == "hangup":
                self.hung_up_by = "callee"
                self.audio_input.close()
                if self._hangup_handler is not None:
                    self._hangup_handler()
                else:  # no session attached (yet): the carrier reports it itself
                    self.bus.publish(RemoteHangup(call_id=self.bus.call_id, at=loop.time()))
                return
            started = loop.time()
            await self._play(seg)
            prev_end = loop.time()
            self.played.append((seg.payload, started, prev_end))
            if seg.payload in ("say", "audio"):
                self.voice_ends.append(max(started, prev_end - seg.quiet_tail))

    async def _play(self, seg: PreparedSegment) -> None:
        if seg.payload == "dtmf" and self._dtmf_handler is not None and seg.dtmf:
            self._dtmf_handler(seg.dtmf)
        speaking = seg.payload == "say" and self.text_only and self.feed_stt is not None
        if speaking:
            assert self.feed_stt is not None
            self.feed_stt.speech_started()
        if len(seg.audio):
            self.audio_input.play(seg.audio)
        if speaking and seg.text and seg.seconds > 2 * INTERIM_AFTER:
            # like a streaming STT: the first words arrive while the callee is still talking
            assert self.feed_stt is not None
            await asyncio.sleep(INTERIM_AFTER)
            words = seg.text.split()
            heard = max(1, int(len(words) * INTERIM_AFTER / seg.seconds))
            self.feed_stt.interim_transcript(" ".join(words[:heard]))
            await asyncio.sleep(seg.seconds - INTERIM_AFTER)
        else:
            await asyncio.sleep(seg.seconds)
        if speaking:
            assert self.feed_stt is not None
            if seg.text:
                self.feed_stt.final_transcript(seg.text)
            self.feed_stt.speech_ended()

    async def _wait_trigger(self, seg: PreparedSegment, prev_end: float) -> None:
        loop = asyncio.get_running_loop()
        assert self.answered_at is not None
        if seg.trigger == "at":
            assert seg.at is not None
            await _sleep_until(self.answered_at + seg.at)
            return
        if seg.trigger == "previous":
            await _sleep_until(prev_end + seg.gap)
            return
        deadline = prev_end + seg.timeout if seg.timeout is not None else None
        while True:
            fired = self._fired(seg, prev_end)
            if fired is not None:
                await _sleep_until(fired + seg.gap)
                return
            if self.hung_up_by is not None:
                return
            self._changed.clear()
            if deadline is None:
                await self._changed.wait()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return

    def _fired(self, seg: PreparedSegment, since: float) -> float | None:
        obs = self._observed
        if seg.trigger == "agent_turn":
            # a turn cut short (by the callee or otherwise) did not finish playing
            return next(
                (t for t, interrupted in obs.turn_ends if t >= since and not interrupted), None
            )
        if seg.trigger == "agent_speech_start":
            return next((t for t in obs.speech_starts if t >= since), None)
        if seg.trigger == "dtmf":
            sent = ""
            for t, digits in obs.dtmf:
                if t < since:
                    continue
                if seg.digits is None:
                    return t
                sent += digits
                if sent == seg.digits:
                    return t  # exactly those digits since the segment was armed
            return None
        raise ValueError(f"unknown trigger {seg.trigger!r}")

    def _on_agent_event(self, msg: Any) -> None:
        match msg:
            case AgentSpeechStarted(at=at):
                self._observed.speech_starts.append(at)
            case AgentTurnCompleted(at=at, interrupted=interrupted):
                self._observed.turn_ends.append((at, interrupted))
            case DtmfSent(at=at, digits=digits):
                self._observed.dtmf.append((at, digits))
        self._changed.set()

    # -- recording ---------------------------------------------------------

    def _noise(self, n: int) -> np.ndarray:
        assert self._noise_level is not None
        return (self._rng.standard_normal(n) * self._noise_level).astype(np.float32)

    def _on_callee_frame(self, start: float, samples: np.ndarray) -> None:
        self._record_callee(start, samples)
        for tap in self._taps:
            tap(start, samples)

    def _record_callee(self, start: float, samples: np.ndarray) -> None:
        if self.recorder is not None and self.answered_at is not None:
            self.recorder.add("callee", start - self.answered_at, samples)

    def _record_agent(self, start: float, samples: np.ndarray, sr: int) -> None:
        if self.recorder is None or self.answered_at is None:
            return
        if sr != self.sample_rate:
            from agent.telephony.audio import resample

            samples = resample(samples, sr, self.sample_rate)
        self.recorder.add("agent", start - self.answered_at, samples)

    async def aclose(self) -> None:
        for sub in self._subs:
            sub.cancel()
        self.audio_input.close()
        await self.audio_output.aclose()


def _quiet_tail(audio: np.ndarray, sample_rate: int) -> float:
    """Seconds at the end of ``audio`` quieter than 40 dB below its loudest 20 ms."""
    hop = max(1, int(sample_rate * 0.02))
    n = len(audio) // hop
    if n == 0:
        return 0.0
    frames = audio[: n * hop].reshape(n, hop).astype(np.float64)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    loud = np.nonzero(rms >= 0.01 * float(rms.max()))[0]
    if loud.size == 0:
        return 0.0
    return (len(audio) - (int(loud[-1]) + 1) * hop) / sample_rate


async def _sleep_until(when: float) -> None:
    delay = when - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)
