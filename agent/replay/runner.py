"""Replays recorded calls through the real runtime: simulator, four actors, models.

Models are built once per run and shared by the calls (they are loaded once per
process anyway). Each call gets its own bus, simulator and actors. Results do
not depend on the speed: on the virtual clock, time stands still while a model
runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.app.call import ModelSet, new_call_id, run_call
from agent.app.config import AgentConfig
from agent.app.guarding import GuardrailFactory
from agent.core import Bus
from agent.core.messages import AgentSpeechStarted, AgentTurnCompleted, AmdPrediction, VoicemailLeft
from agent.models.registry import build_amd_classifier, build_llm, build_stt, build_tts, build_vad
from agent.replay.manners import count_cut_ins
from agent.replay.observer import CallObserver, answered_lines
from agent.replay.results import CallResult, judge
from agent.telephony.sim.io import TranscriptFeedSTT
from agent.telephony.sim.recorded_call import RecordedCall
from agent.telephony.sim.simulator import CallSimulator, LineSynth, SpeechSynth
from agent.telephony.sim.voices import (
    VoicedSynth,
    VoiceError,
    check_installed,
    parse_voice,
    pick_voice,
    piper_cache,
)
from agent.trust.desk import GuardianDesk

logger = logging.getLogger("agent.replay")

__all__ = ["ReplayOptions", "Replayer", "default_cache_dir", "voice_problem"]


def default_cache_dir() -> Path:
    """Where synthesised callee speech is cached (``CALLRT_CACHE_DIR`` overrides)."""
    env = os.environ.get("CALLRT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "callrt"


@dataclass
class ReplayOptions:
    text_only: bool = False
    record_dir: Path | None = None
    cache_dir: Path | None = None
    sample_rate: int = 16000
    #: the run's callee voice (``--voices``): says the lines whose line and call name none
    voice: str | None = None


def voice_problem(calls: Sequence[RecordedCall], run_voices: Sequence[str] = ()) -> str | None:
    """Why these voices cannot be synthesised here (espeak-ng or one of its voices
    missing), naming the file and key or ``--voices``; None when they all can."""
    for text in run_voices:
        try:
            check_installed(parse_voice(text))
        except VoiceError as exc:
            return f"--voices: {exc}"
    for call in calls:
        named: list[tuple[str, str | None]] = [("voice", call.voice)] + [
            (f"callee[{i}].voice", seg.voice) for i, seg in enumerate(call.callee)
        ]
        for key, named_voice in named:
            if named_voice is None:
                continue
            try:
                check_installed(parse_voice(named_voice))
            except VoiceError as exc:
                return f"{call.source_path or call.name}: {key}: {exc}"
    return None


@dataclass
class ReplayedCall:
    """A call's judged result plus what benchmarks want to know."""

    result: CallResult
    latencies: list[float]
    wall_seconds: float
    #: end of the callee's audio (ground truth) to the agent's first audio, per answered line
    latencies_from_audio_end: list[float] = field(default_factory=list)
    #: AMD's decision time minus the end of the callee line it followed (None when
    #: there was no decision or no line before it).
    amd_delay: float | None = None
    #: what the callee played, (payload, start, end) in seconds after the answer
    played: list[tuple[str, float, float]] = field(default_factory=list)
    #: the voicemail message that was left, (start, end) after the answer
    voicemail_message: tuple[float, float] | None = None
    #: seconds from AMD's first "person" verdict to the agent's next first audio
    talk_after_human: float | None = None
    #: every message the call published on its bus, in order (for benchmarks)
    messages: list[object] = field(default_factory=list)
    #: agent turns whose first audio started inside a callee utterance (agent/replay/manners.py)
    cut_ins: int = 0
    #: as ``amd_delay``, from the end of the voice in that line rather than the end of
    #: its audio, which may end in quiet (espeak-ng appends up to 0.4 s)
    amd_delay_from_voice: float | None = None


class Replayer:
    """Replays calls one after another on the running loop.

    Args:
        config: the agent config (a call's ``agent:`` overrides apply per call).
        options: text-only, recording folder, cache folder.
        models: prebuilt models (tests inject scripted fakes); built from config otherwise.
        synth: renders callee speech that names no voice (defaults to the offline
            Piper voice, cached); lines in a named voice (the line's, the call's or
            ``options.voice``) are said in it (agent/telephony/sim/voices.py).
    """

    def __init__(
        self,
        config: AgentConfig,
        options: ReplayOptions,
        *,
        models: ModelSet | None = None,
        synth: SpeechSynth | None = None,
    ) -> None:
        self.config = config
        self.options = options
        self._models = models
        self._synth = synth
        self._voiced: VoicedSynth | None = None
        #: where the calls' guardian questions go (tests answer them here)
        self.desk = GuardianDesk()

    def _build_models(self) -> ModelSet:
        m = self.config.models
        main_llm = build_llm(m.llm, base_url=m.llm_base_url, **m.llm_options)
        classifier = build_amd_classifier(
            self.config.amd.classifier, session_llm=main_llm, base_url=m.llm_base_url
        )
        guardrails = GuardrailFactory(session_llm=main_llm, base_url=m.llm_base_url)
        if self.options.text_only:
            return ModelSet(
                stt=TranscriptFeedSTT(),
                llm=main_llm,
                tts=build_tts(m.text_only_tts, sample_rate=m.tts_sample_rate),
                vad=None,
                turn_detection="stt",
                amd_classifier=classifier,
                guardrails=guardrails,
            )
        session_vad = build_vad(m.vad, min_silence_duration=self.config.turn.vad_min_silence)
        return ModelSet(
            stt=build_stt(m.stt, vad=session_vad, **m.stt_options),
            llm=main_llm,
            tts=build_tts(m.tts, sample_rate=m.tts_sample_rate),
            vad=session_vad,
            turn_detection="vad",
            speech_end_offset=self.config.turn.vad_min_silence,
            amd_classifier=classifier,
            guardrails=guardrails,
        )

    def _default_synth(self) -> SpeechSynth:
        root = (self.options.cache_dir or default_cache_dir()) / "speech"
        return piper_cache(root).get

    def line_synth(self, call: RecordedCall, default: SpeechSynth | None) -> LineSynth:
        """Picks the synthesiser of each of ``call``'s lines: in the voice the line, the call
        or the run names (in that order), else ``default``."""
        if self._voiced is None:
            root = (self.options.cache_dir or default_cache_dir()) / "speech"
            self._voiced = VoicedSynth(root, pick_voice(seed=""))
        voiced = self._voiced

        def pick(line_voice: str | None) -> SpeechSynth:
            chosen = line_voice or call.voice or self.options.voice
            if chosen is None and default is not None:
                return default
            voice = pick_voice(chosen, seed=call.name)
            return lambda text, rate: voiced.speak(text, rate, voice)

        return pick

    def voice_of(self, call: RecordedCall) -> str | None:
        """The voice that says ``call``'s lines that name none, when one is named (else None)."""
        if self.options.text_only:
            return None
        return call.voice or self.options.voice

    def models(self) -> ModelSet:
        if self._models is None:
            self._models = self._build_models()
        return self._models

    async def replay(self, call: RecordedCall) -> ReplayedCall:
        """Replay one call and judge it against its ``expect``."""
        loop = asyncio.get_running_loop()
        wall0 = time.perf_counter()
        source = str(call.source_path) if call.source_path else call.name
        config = self.config.with_overrides(call.agent, source=source)
        models = self.models()
        if self.options.text_only:
            # the feed is per call: a fresh one so no event leaks between calls
            models = dataclasses.replace(
                models, stt=TranscriptFeedSTT(), vad=None, turn_detection="stt"
            )
        synth = self._synth
        if synth is None and not self.options.text_only:
            synth = self._synth = self._default_synth()
        call_id = new_call_id()
        bus = Bus(call_id)
        observer = CallObserver()
        observer.attach(bus)
        sim = CallSimulator(
            call,
            bus=bus,
            text_only=self.options.text_only,
            synth=synth,
            line_synth=None if self.options.text_only else self.line_synth(call, synth),
            sample_rate=self.options.sample_rate,
            feed_stt=models.stt if isinstance(models.stt, TranscriptFeedSTT) else None,
            record=self.options.record_dir is not None,
        )
        await loop.run_in_executor(None, sim.prepare)
        try:
            await run_call(
                call_id=call_id,
                bus=bus,
                direction=call.direction,
                line=sim,
                config=config,
                models=models,
                max_seconds=call.max_seconds,
                desk=self.desk,
            )
        finally:
            await sim.aclose()
        observed = observer.result(call.name)
        observed = observed.model_copy(
            update={"dtmf_sent": sim.dtmf_sent, "voice": self.voice_of(call)}
        )
        if self.options.record_dir is not None and sim.recorder is not None:
            self.options.record_dir.mkdir(parents=True, exist_ok=True)
            path = self.options.record_dir / f"{call.name}.wav"
            await loop.run_in_executor(None, sim.recorder.write, path)
        return ReplayedCall(
            judge(call, observed),
            observer.latencies,
            time.perf_counter() - wall0,
            _audio_end_latencies(sim.played, observer.messages),
            _amd_delay(sim, observed),
            _relative_played(sim),
            _voicemail_message(observer.messages, sim.answered_at),
            _talk_after_human(observer.messages),
            list(observer.messages),
            cut_ins=count_cut_ins(sim.played, call.callee, observer.messages),
            amd_delay_from_voice=_amd_delay_from_voice(sim, observed),
        )

    async def replay_all(
        self,
        calls: Sequence[RecordedCall],
        on_result: Callable[[RecordedCall, ReplayedCall], None] | None = None,
    ) -> list[ReplayedCall]:
        """Replay calls in order; ``on_result`` is called as each finishes."""
        out = []
        for call in calls:
            replayed = await self.replay(call)
            if on_result is not None:
                on_result(call, replayed)
            out.append(replayed)
        return out


def _audio_end_latencies(
    played: list[tuple[str, float, float]], messages: list[object]
) -> list[float]:
    """For each callee line the agent answered, its audio end to the agent's next first audio."""
    starts = [m.at for m in messages if isinstance(m, AgentSpeechStarted)]
    return [reply - end for end, reply in answered_lines(played, starts)]


def _amd_delay(sim: CallSimulator, observed: CallResult) -> float | None:
    """Seconds from the end of the callee line that AMD's decision followed, to the decision.

    For a person who answers "Hello?" that is the end of their first utterance;
    after a screener or a menu, the end of the person's first line. The line the
    decision followed is the last one whose voice had ended by then: a decision made
    in the quiet a line's audio ends with (a synthesiser appends up to 0.4 s) follows
    that line, and counts as 0 s after it.
    """
    line = _line_decided_after(sim, observed)
    return None if line is None else max(0.0, line[2] - line[1])


def _amd_delay_from_voice(sim: CallSimulator, observed: CallResult) -> float | None:
    """Seconds from the end of the voice that AMD's decision followed, to the decision."""
    line = _line_decided_after(sim, observed)
    return None if line is None else line[2] - line[0]


def _line_decided_after(
    sim: CallSimulator, observed: CallResult
) -> tuple[float, float, float] | None:
    """(voice end, audio end, decision time) of the callee line AMD's decision followed:
    the last speech line whose voice had ended when AMD decided, in loop time."""
    if observed.amd is None or observed.amd.decided_at is None or sim.answered_at is None:
        return None
    decided = observed.amd.decided_at + sim.answered_at
    # voice_ends holds one entry per speech segment, in the order `played` lists them
    ends = [end for payload, _, end in sim.played if payload in ("say", "audio")]
    lines = [(voice, end) for voice, end in zip(sim.voice_ends, ends, strict=True)]
    before = [line for line in lines if line[0] <= decided]
    return (*before[-1], decided) if before else None


def _relative_played(sim: CallSimulator) -> list[tuple[str, float, float]]:
    base = sim.answered_at or 0.0
    return [(payload, start - base, end - base) for payload, start, end in sim.played]


def _voicemail_message(
    messages: list[object], answered_at: float | None
) -> tuple[float, float] | None:
    """When the voicemail message that was left started and ended, after the answer."""
    left = next((m for m in messages if isinstance(m, VoicemailLeft)), None)
    if left is None or answered_at is None:
        return None
    start = next(
        (m.at for m in messages if isinstance(m, AgentSpeechStarted) and m.run_id == left.run_id),
        None,
    )
    end = next(
        (m.at for m in messages if isinstance(m, AgentTurnCompleted) and m.run_id == left.run_id),
        None,
    )
    if start is None or end is None:
        return None
    return start - answered_at, end - answered_at


def _talk_after_human(messages: list[object]) -> float | None:
    """Seconds from AMD's first "person" verdict to the agent's first audio after it."""
    human = next(
        (m.at for m in messages if isinstance(m, AmdPrediction) and m.stage == "human"), None
    )
    if human is None:
        return None
    start = next(
        (m.at for m in messages if isinstance(m, AgentSpeechStarted) and m.at >= human), None
    )
    return None if start is None else start - human
