"""AmdActor: the call's answering-machine detector.

It listens from the answer on. Callee audio reaches it through the
transport's audio tap (never as bus messages): the beep and SIT detectors run
in that callback, frame by frame, and what they hear is published as
:class:`~agent.core.messages.AmdTone`. Speech events, final transcripts, the
agent's turns and DTMF come from the bus. The policy lives in
:class:`~amd.detector.AmdDetector`; this actor carries out its outputs
(timers, classifier requests, publishing predictions and the completion).

Predictions only: what to do about them is the call controller's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from agent.core import Actor, ActorStopped, Bus
from agent.core.messages import AmdCompleted, AmdPrediction, AmdTone, TimerFired

from .acoustic import BeepDetector, BeepEvent, SitDetector
from .classifier import AMD_DECISION, LexicalAmdModel, history_input
from .config import AmdConfig
from .detector import (
    AmdDetector,
    ArmTimer,
    CancelTimer,
    Classify,
    Completed,
    Output,
    Predicted,
)

logger = logging.getLogger("amd")

__all__ = ["AmdActor", "ToneListener"]

#: interim readings kept per utterance for the detector (an interim every 0.7 s of
#: speech: a minute of it)
MAX_READINGS = 90

#: Dual tones that are call progress, not voicemail beeps: ringback, busy, dial tone.
_PROGRESS_PAIRS = ((440.0, 480.0), (480.0, 620.0), (350.0, 440.0), (400.0, 450.0))
#: Ringback: North American (440 + 480 Hz, 2 s on) and British (400 + 450 Hz, 0.4 s bursts).
_RINGBACK_PAIRS = ((440.0, 480.0), (400.0, 450.0))
#: The shortest ringback burst (the British double ring's bursts are 0.4 s).
_RINGBACK_MIN_SECONDS = 0.3
#: callee sound is a frame this far over the quietest frame of the pause before it
_ONSET_RISE_DB = 12.0
#: ... and over this level (dBFS), so a digitally silent pause does not make dither sound
_ONSET_MIN_DB = -50.0
#: sound this short is a click, not the start of words
_ONSET_MIN_SECONDS = 0.04


def _is_pair(hz: tuple[float, ...], pairs: tuple[tuple[float, float], ...]) -> bool:
    """Whether ``hz`` is a dual tone within 15 Hz of one of ``pairs`` (low, high)."""
    if len(hz) != 2:
        return False
    lo, hi = sorted(hz)
    return any(abs(lo - a) < 15 and abs(hi - b) < 15 for a, b in pairs)


def _is_ringback(tone: BeepEvent) -> bool:
    """Whether ``tone`` is a burst of ringback (a dual tone of a ringback pair)."""
    return tone.end - tone.start >= _RINGBACK_MIN_SECONDS and _is_pair(tone.hz, _RINGBACK_PAIRS)


@dataclass(frozen=True)
class _Classified:
    kind = "amd_classified"
    turn: int
    category: str
    confidence: float
    reason: str


class ToneListener:
    """Runs the beep and SIT detectors on callee frames (synchronous, cheap).

    A tone counts as a beep only when it is not call progress (ringback, busy),
    lasts at most ``max_seconds`` and is followed by ``quiet_after`` seconds
    without loud audio (a note of hold music is followed by more music).
    A ringback burst is published as ``ringback``: after the answer, the line
    ringing again means a menu or a screener put the call through to someone.

    Args:
        sample_rate: Rate of the frames.
        config: Thresholds.
        publish: Called with each :class:`AmdTone`.
        call_id: For the messages.
    """

    def __init__(
        self,
        sample_rate: int,
        config: AmdConfig,
        publish: Any,
        call_id: str,
    ) -> None:
        self.sample_rate = sample_rate
        self.cfg = config
        self._publish = publish
        self._call_id = call_id
        self.max_seconds = config.beep_max_seconds
        self._new_detectors()
        self._failed = False
        self._pending: BeepEvent | None = None
        self._pending_loud = False
        self._levels: deque[tuple[float, float]] = deque(maxlen=150)  # 3 s of 20 ms frames
        self._music_until = -1.0
        self.active = False

    def _new_detectors(self) -> None:
        self.beeps = BeepDetector(
            self.sample_rate,
            min_seconds=self.cfg.beep_min_seconds,
            low_hz=self.cfg.beep_low_hz,
            high_hz=self.cfg.beep_high_hz,
        )
        self.sit = SitDetector(self.sample_rate)

    def push(self, t: float, samples: np.ndarray) -> None:
        """Feeds one callee frame. Never raises: the transport calls this from the
        session's audio path, and a fault here must not stop the call's audio."""
        try:
            self._push(t, samples)
        except Exception:
            # the frame that broke a detector is dropped with its state; tones
            # are listened for again from the next frame
            if not self._failed:
                logger.exception(
                    "tone detection failed; its state is reset",
                    extra={"call_id": self._call_id},
                )
            self._failed = True
            self._new_detectors()
            self._pending = None

    def _push(self, t: float, samples: np.ndarray) -> None:
        if not self.active or len(samples) == 0:
            return
        level = 10 * math.log10(float(np.mean(samples * samples)) + 1e-12)
        self._levels.append((t, level))
        end = t + len(samples) / self.sample_rate
        for ev in self.sit.push(samples, t):
            self._pending = None
            self._emit("sit", ev.start, ev.end, ev.hz)
        for beep in self.beeps.push(samples, t):
            if _is_ringback(beep):
                self._pending = None
                self._emit("ringback", beep.start, beep.end, beep.hz)
                continue
            if beep.start < self._music_until or not self._is_beep(beep) or self._after_sound(beep):
                self._pending = None
                continue
            self._pending, self._pending_loud = beep, False
        p = self._pending
        if p is None:
            return
        beep_level = max((lv for ft, lv in self._levels if p.start <= ft < p.end), default=level)
        if t >= p.end + 0.04 and level > beep_level - 15.0:
            self._pending_loud = True
        if end >= p.end + self.cfg.beep_quiet_after:
            self._pending = None
            if self._pending_loud:
                # tone after tone: music or call progress; ignore tones for a while
                self._music_until = end + 1.5
            else:
                self._emit("beep", p.start, p.end, p.hz)

    @property
    def tone_active(self) -> bool:
        """A steady tone that may still prove to be a beep is playing, or one just ended.

        A tone already longer than ``beep_max_seconds`` is no beep (a held note, a
        hum): deciding is not put off for it.
        """
        held = 0.1 <= self.beeps.tone_seconds <= self.max_seconds
        return self.active and (held or self._pending is not None)

    def sound_onset(self, now: float, after: float) -> float | None:
        """When the sound going on at ``now`` began, if it began after ``after``.

        The session's VAD reports speech only once it has heard some of it; these
        frames show the voice from its first loud frame. Sound is a frame at least
        ``_ONSET_RISE_DB`` over the quietest frame since ``after`` (the pause before
        it) and over ``_ONSET_MIN_DB``. It is going on when the latest frames are
        sound and it has lasted ``_ONSET_MIN_SECONDS``. Sound that was already there
        at ``after`` (a hum, music the VAD let go) has no onset.
        """
        frames = [(ft, lv) for ft, lv in self._levels if ft >= after]
        if len(frames) < 3 or frames[-1][0] < now - 0.06:
            return None
        loud = max(min(lv for _, lv in frames) + _ONSET_RISE_DB, _ONSET_MIN_DB)
        start: float | None = None
        for ft, lv in reversed(frames):
            if lv < loud:
                break
            start = ft
        else:
            return None  # sound all along since `after`: no pause, no onset
        if start is None or frames[-1][0] - start < _ONSET_MIN_SECONDS - 1e-9:
            return None
        return start

    def _is_beep(self, beep: BeepEvent) -> bool:
        if beep.end - beep.start > self.max_seconds:
            return False
        if _is_pair(beep.hz, _PROGRESS_PAIRS):
            return False
        if len(beep.hz) == 2:
            lo, hi = sorted(beep.hz)
            ratio = hi / lo
            if ratio < 1.15 or (lo < 600.0 and ratio < 1.35):
                # two close low peaks: neighbouring harmonics of a voice under its
                # first formant (their ratio drifts with the pitch), not a dual beep
                return False
            # a voice's pitch glides while a tone is measured, so low pairs (where a
            # voice's strong harmonics are) are let off further from an exact ratio:
            # espeak-ng's held vowels measured 322.7 + 476.9 Hz, 1.478 against 3/2
            tolerance = 0.03 if lo < 600.0 else 0.01
            for n in range(1, 9):
                # a low octave drifts furthest in a glide, twice the pitch's own
                # change: espeak-ng's "anika" voice measured 296 + 574 Hz (1.94) in
                # "... after the tone", and as a tone followed by speech it made the
                # listener ignore the real beep 1.1 s later as music
                allowed = 0.04 if n == 1 and lo < 600.0 else tolerance
                if abs(ratio - (n + 1) / n) < allowed * ratio:
                    return False  # neighbouring harmonics of one pitch: a voice or a note
        return True

    def _after_sound(self, beep: BeepEvent) -> bool:
        """Whether loud audio runs right up to the tone (the end of a vowel, not a beep).

        Voicemail systems leave a short pause between the greeting and the beep.
        """
        beep_level = max(
            (lv for ft, lv in self._levels if beep.start <= ft < beep.end), default=0.0
        )
        before = [lv for ft, lv in self._levels if beep.start - 0.08 <= ft < beep.start - 0.02]
        return any(lv > beep_level - 10.0 for lv in before)

    def _emit(self, tone: str, start: float, end: float, hz: tuple[float, ...]) -> None:
        now = asyncio.get_running_loop().time()
        self._publish(
            AmdTone(
                call_id=self._call_id,
                at=now,
                tone=tone,  # type: ignore[arg-type]
                start=start,
                end=end,
                hz=tuple(round(f, 1) for f in hz),
            )
        )


class AmdActor(Actor):
    """The call's AMD: per-turn predictions with rolling history, and one completion.

    Args:
        call_id: The call.
        bus: The call bus.
        config: Thresholds (``amd:`` in the agent config).
        classifier: The model for turns phrases and tones do not settle
            (the built-in lexical model when None).
        speech_end_offset: How long after the end of the voice the speech-stopped
            event arrives (the VAD's silence window; 0 in text-only replays).
        sample_rate: Rate of the audio tap's frames.
        enabled: False on calls that skip AMD (inbound): the actor stays idle.
    """

    SUBSCRIBES = (
        "call_answered",
        "user_speech_started",
        "user_speech_stopped",
        "user_transcript",
        "agent_speech_started",
        "agent_turn_completed",
        "dtmf_sent",
        "amd_tone",
        "voicemail_left",
        "call_ended",
    )

    def __init__(
        self,
        *,
        call_id: str,
        bus: Bus,
        config: AmdConfig | None = None,
        classifier: llm.DecisionModel | None = None,
        speech_end_offset: float = 0.0,
        sample_rate: int = 16000,
        enabled: bool = True,
    ) -> None:
        super().__init__("amd")
        self.call_id = call_id
        self.bus = bus
        self.cfg = config or AmdConfig()
        self.enabled = enabled
        self.detector = AmdDetector(self.cfg)
        self.lexical = LexicalAmdModel(short_words=self.cfg.short_greeting_words)
        self.classifier = classifier or self.lexical
        self.speech_end_offset = speech_end_offset
        # the interim readings of the utterance being transcribed, each once
        self._readings: dict[str, None] = {}
        self.tones = ToneListener(sample_rate, self.cfg, self._publish_tone, call_id)
        self.answered_at: float | None = None
        #: the loop time of the call's first event: the detector's clock starts there
        self._origin: float | None = None
        #: when each armed timer is due on the detector's clock
        self._due: dict[str, float] = {}
        bus.subscribe(self.SUBSCRIBES, self)

    def audio_tap(self, t: float, samples: np.ndarray) -> None:
        """The transport calls this with every callee frame (loop time, float32 samples).

        The listener hears them on the detector's clock, like every other event."""
        self.tones.push(self._rel(t), samples)

    def _publish_tone(self, tone: AmdTone) -> None:
        """A tone the listener heard, published with its times back on the loop's clock."""
        self.bus.publish(
            tone.model_copy(update={"start": self._abs(tone.start), "end": self._abs(tone.end)})
        )

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _rel(self, at: float) -> float:
        """A loop time on the detector's clock: seconds since the call's first event,
        to the microsecond.

        The detector compares spans with thresholds ("a greeting of at most 1.2 s").
        A span taken between two loop times carries float error that depends on how
        far the loop's clock has run (1.2 is 1.1999999999999993 at one start and
        1.2000000000000002 at another), so on loop time the same call could be decided
        two ways depending on when it started: alone or after other calls in a replay,
        or anywhere in a worker's life. On this clock it is decided one way.
        """
        if self._origin is None:
            self._origin = at
        return round(at - self._origin, 6)

    def _abs(self, rel: float) -> float:
        """A time on the detector's clock back on the loop's."""
        assert self._origin is not None, "the detector's clock starts with the first event"
        return self._origin + rel

    async def receive(self, msg: Any) -> Any:
        if not self.enabled:
            return None
        d = self.detector
        rel = self._rel
        t = rel(self._now())
        out: list[Output] = []
        match msg.kind:
            case "call_answered":
                self.answered_at = msg.at
                self.tones.active = True
                out = d.answered(rel(msg.at))
            case "user_speech_started":
                out = d.speech_started(rel(msg.at))
            case "user_speech_stopped":
                out = d.speech_stopped(rel(msg.at), rel(msg.at - self.speech_end_offset))
            case "user_transcript" if msg.final:
                out = d.transcript(t, msg.text, readings=tuple(self._readings))
                self._readings = {}
            case "user_transcript":
                self._readings[msg.text] = None
                if len(self._readings) > MAX_READINGS:
                    # the oldest reading goes: the latest cover most of the utterance
                    del self._readings[next(iter(self._readings))]
            case "agent_speech_started":
                out = d.agent_speech_started(t)
            case "agent_turn_completed":
                out = d.agent_turn(t, msg.text)
            case "dtmf_sent":
                out = d.dtmf_sent(t, msg.digits)
            case "amd_tone":
                out = d.tone(t, msg.tone, rel(msg.start), rel(msg.end))
            case "amd_classified":
                out = d.classified(t, msg.turn, msg.category, msg.confidence, msg.reason)
            case "timer_fired" if (
                msg.name == "settle" and (hold := self._settle_hold(t)) is not None
            ):
                # the line is not quiet yet: what is on it comes before this decision
                out = [ArmTimer("settle", hold)]
            case "timer_fired":
                due = self._due.get(msg.name)
                if due is not None and due <= t + 1e-5:
                    # at the time the detector asked for, not a microsecond before it
                    # (a timer re-armed since it fired keeps its new time)
                    del self._due[msg.name]
                    t = max(t, due)
                out = d.timer(t, msg.name)
            case "voicemail_left":
                out = d.voicemail_left(t)
            case "call_ended":
                self.tones.active = False
                # an utterance still being decoded when the line closed: its interims
                out = d.call_ended(t, readings=tuple(self._readings))
                self._readings = {}
        self._apply(out, turn_id=getattr(msg, "turn_id", None))
        return None

    def _settle_hold(self, t: float) -> float | None:
        """When to look again at a settle due at ``t`` (None: decide now).

        A tone is playing (a beep after a short greeting?): decide once it ends.

        The VAD reports a start a tenth of a second or so after the voice began. A
        settle that falls due in that lag ("Thank you for calling X.", a pause, then
        the menu) would decide on the words before it and let the agent talk over the
        ones that began; whether the timer or the VAD's report came first was up to
        the threads that ran the models. The frames the listener taps say which came
        first: while sound that began after the callee's last words goes on, the
        settle waits, at most ``onset_hold`` from its onset. The VAD's report cancels
        it; a sound the VAD never calls speech lets it go at that limit.
        """
        if self.tones.tone_active:
            return t + 0.1
        s = self.detector.s
        if self.cfg.onset_hold <= 0 or s.done or s.speaking or s.last_speech_end is None:
            return None
        onset = self.tones.sound_onset(t, s.last_speech_end)
        if onset is None:
            return None
        until = onset + self.cfg.onset_hold
        if t >= until - 1e-6:
            return None
        return round(min(t + 0.05, until), 6)

    def _apply(self, outputs: list[Output], *, turn_id: str | None) -> None:
        loop = asyncio.get_running_loop()
        for o in outputs:
            match o:
                case ArmTimer(name=name, at=at):
                    self._due[name] = at
                    self.start_timer(name, at=self._abs(at))
                case CancelTimer(name=name):
                    self._due.pop(name, None)
                    self.cancel_timer(name)
                case Classify():
                    self.spawn(self._classify(o), name="amd:classify")
                case Predicted():
                    self.bus.publish(
                        AmdPrediction(
                            call_id=self.call_id,
                            at=self._abs(o.at),
                            category=o.category,
                            stage=o.stage,
                            final=False,
                            reason=o.reason,
                            turn_id=turn_id or f"amd_{o.turn}",
                            turn=o.turn,
                            confidence=round(o.confidence, 3),
                            transcript=o.transcript,
                            delay=o.delay,
                            evidence=o.evidence,
                            provisional=o.provisional,
                            changed=o.changed,
                            asks=o.asks,
                        )
                    )
                case Completed():
                    self.tones.active = self.tones.active and o.category != "machine-unavailable"
                    self.bus.publish(
                        AmdCompleted(
                            call_id=self.call_id,
                            at=loop.time(),
                            category=o.category,
                            stages=o.stages,
                            decided_at=(None if o.decided_at is None else self._abs(o.decided_at)),
                            reason=o.reason,
                        )
                    )

    async def _classify(self, req: Classify) -> None:
        text = history_input(stage=req.stage, turns=req.turns, dtmf=req.dtmf)
        decisions = {"category": AMD_DECISION}
        result: tuple[str, float, str] | None = None
        for model in dict.fromkeys([self.classifier, self.lexical]):
            try:
                resp = await asyncio.wait_for(
                    model.evaluate(
                        input=text,
                        decisions=decisions,
                        conn_options=APIConnectOptions(
                            max_retry=0, timeout=self.cfg.classifier_timeout
                        ),
                    ),
                    self.cfg.classifier_timeout,
                )
                choice = resp.results.get("category")
                if choice is None or choice.kind != "choice":
                    raise ValueError(resp.errors.get("category", "no category"))
                probs = choice.probabilities or {}
                conf = float(probs.get(choice.value, 0.9 if model is not self.lexical else 0.7))
                reason = str(choice.provider_data.get("reason", "")) or f"classifier {model.model}"
                result = (choice.value, conf, reason)
                break
            except Exception as exc:  # a slow or failing model must not stall AMD
                logger.warning(
                    "amd classifier failed; falling back",
                    extra={"call_id": self.call_id, "error": type(exc).__name__},
                )
        if result is not None and not self.stopped:
            # an owned task may wait for room: the result is not dropped
            with contextlib.suppress(ActorStopped):
                await self.tell(_Classified(req.turn, *result))

    def timer_message(self, name: str, at: float) -> TimerFired:
        return TimerFired(call_id=self.call_id, at=at, name=name)

    async def on_restart(self, error: BaseException, timers: Mapping[str, float]) -> None:
        # The detector's state survived; its deadlines (settle, the hard timeout)
        # are still owed. A classification in flight is lost: the detector's own
        # timers decide that turn without it.
        for name, when in timers.items():
            self.start_timer(name, at=when)

    async def on_stop(self) -> None:
        self.tones.active = False
