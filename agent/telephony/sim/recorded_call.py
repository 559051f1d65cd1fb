"""The recorded-call format (RECORDED_CALLS.md): one ``*.call.yaml`` file as validated models.

:mod:`agent.replay.loader` reads files and maps validation errors to file, line and
key. The simulator reads segments through the typed accessors :attr:`Segment.trigger`
and :attr:`Segment.payload` rather than the raw optional fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import soundfile as sf
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent.core.messages import AnswerStatus, Direction, Disposition, GuardrailHook
from agent.core.messages import FinalAmdCategory as AmdCategory
from agent.telephony.sim.voices import VoiceError, check_installed, espeak_voices, parse_voice

SPEECH_SECONDS_PER_CHAR = 0.065
#: Tones are rendered at the replay's 16 kHz audio rate, so they must stay below 8 kHz.
MAX_TONE_HZ = 8000.0
"""Estimated speech duration per character of a ``say`` text (``--text-only``)."""

Codec = Literal["none", "pcmu", "pcma"]
GuardrailAction = Literal["allow", "block", "steer"]

GUARDRAIL_COUNTERS: dict[str, tuple[GuardrailHook, GuardrailAction]] = {
    "blocked_user_turns": ("on_user_turn", "block"),
    "steered_user_turns": ("on_user_turn", "steer"),
    "blocked_agent_sentences": ("on_agent_sentence", "block"),
}
"""``expect.guardrail`` counters: each counts result entries with this hook and action."""

_NAME_RE = re.compile(r"[a-z0-9._-]+")
_DTMF_RE = re.compile(r"[0-9*#A-D]*")


class FormatProblem(ValueError):
    """A validator's error about the key at ``loc`` below its model (so the loader names it).

    Args:
        message: What is wrong and what was expected (no key, no file).
        *loc: Keys/indices below the model that raised it; empty for the model itself.
    """

    def __init__(self, message: str, *loc: str | int) -> None:
        super().__init__(message)
        self.loc: tuple[str | int, ...] = loc


def estimated_speech_seconds(text: str) -> float:
    """Estimated duration of ``text`` spoken aloud, at SPEECH_SECONDS_PER_CHAR per character.

    Runs of whitespace count as one character; leading/trailing whitespace is ignored.
    """
    return len(" ".join(text.split())) * SPEECH_SECONDS_PER_CHAR


def describe_value(value: Any) -> str:
    """A value as quoted in error messages: YAML spelling for booleans and null, else repr."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _call_name(value: Any) -> Any:
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise ValueError(
            "expected a name of lowercase letters, digits, '.', '_' or '-', "
            f"got {describe_value(value)}"
        )
    return value


def _text(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected non-empty text, got {describe_value(value)}")
    return value


def _dtmf_keys(value: Any, *, allow_empty: bool = False) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(
            f'expected DTMF keys as a quoted string (e.g. "12#"), got the number {value}'
        )
    if not isinstance(value, str) or not _DTMF_RE.fullmatch(value) or not (value or allow_empty):
        raise ValueError(f"expected DTMF keys (0-9, *, #, A-D), got {describe_value(value)}")
    return value


def _frequencies(value: Any) -> Any:
    values = value if isinstance(value, list | tuple) else [value]
    if not values or any(isinstance(x, bool) or not isinstance(x, int | float) for x in values):
        raise ValueError(
            f"expected a frequency in Hz (number or list of numbers), got {describe_value(value)}"
        )
    if not all(0 < x < MAX_TONE_HZ for x in values):
        raise ValueError(
            f"expected frequencies between 0 and {MAX_TONE_HZ:g} Hz (exclusive), "
            f"got {describe_value(value)}"
        )
    return tuple(float(x) for x in values)


def _not_wait(value: Any) -> Any:
    if value == "wait":
        raise ValueError("'wait' is never a final AMD category or stage (AMD keeps its stage)")
    return value


def _voice(value: Any) -> Any:
    try:
        voice = parse_voice(value)
        if espeak_voices()[0]:
            # accents are checked where espeak-ng is installed; elsewhere the audio
            # replay refuses the voice before the first call starts
            check_installed(voice)
    except VoiceError as exc:
        raise ValueError(str(exc)) from None
    return voice.text


def _hangup(value: Any) -> Any:
    if value is not True:
        raise ValueError(
            f"expected 'hangup: true' (remove the key otherwise), got {describe_value(value)}"
        )
    return value


CallName = Annotated[str, BeforeValidator(_call_name)]
Text = Annotated[str, BeforeValidator(_text)]
DtmfKeys = Annotated[str, BeforeValidator(_dtmf_keys)]
DtmfSent = Annotated[str, BeforeValidator(lambda v: _dtmf_keys(v, allow_empty=True))]
Frequencies = Annotated[tuple[float, ...], BeforeValidator(_frequencies)]
VoiceName = Annotated[str, BeforeValidator(_voice)]
FinalAmdCategory = Annotated[AmdCategory, BeforeValidator(_not_wait)]
Seconds = Annotated[float, Field(ge=0)]
PositiveSeconds = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=0)]


class _Model(BaseModel):
    # strict: YAML already types scalars, so "3" for a number or 1 for text is a mistake.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class Answer(_Model):
    """How the far end of an outbound call picks up."""

    status: AnswerStatus = "answered"
    after: Seconds = 3.0


class Line(_Model):
    """Channel model applied to callee audio (telephone band, G.711, noise floor)."""

    sample_rate: Annotated[int, Field(ge=4000, le=48000)] = 8000
    codec: Codec = "none"
    noise_db: Annotated[float, Field(le=0)] | None = None


class Tone(_Model):
    """A pure (one frequency) or dual/multi tone, e.g. a voicemail beep or SIT tone."""

    hz: Frequencies
    seconds: PositiveSeconds
    level_db: Annotated[float, Field(le=0)] = -12.0


class AfterEvent(StrEnum):
    """What an ``after:`` trigger waits for."""

    PREVIOUS = "previous"
    AGENT_TURN = "agent_turn"
    AGENT_SPEECH_START = "agent_speech_start"
    DTMF = "dtmf"


@dataclass(frozen=True, slots=True)
class AtTrigger:
    """Fire ``seconds`` after answer."""

    seconds: float


@dataclass(frozen=True, slots=True)
class AfterTrigger:
    """Fire ``gap`` seconds after ``event``; or after ``timeout`` seconds once armed.

    A segment is armed when the previous segment ended (at answer for the first).
    ``digits`` (only for ``AfterEvent.DTMF``) waits for exactly those digits, else any.
    """

    event: AfterEvent
    gap: float = 0.0
    timeout: float | None = None
    digits: str | None = None


@dataclass(frozen=True, slots=True)
class SayPayload:
    """Speech: ``audio`` is played with ``text`` as its transcript, else ``text`` is synthesised.

    ``voice`` is the line's own voice string (agent/telephony/sim/voices.py), or None.
    """

    text: str
    audio: Path | None = None
    voice: str | None = None


@dataclass(frozen=True, slots=True)
class AudioPayload:
    """An audio file (any rate, mono or stereo) with no transcript."""

    path: Path


@dataclass(frozen=True, slots=True)
class TonePayload:
    """A tone: the sum of ``hz`` sines at ``level_db`` dBFS for ``seconds``."""

    hz: tuple[float, ...]
    seconds: float
    level_db: float


@dataclass(frozen=True, slots=True)
class SilencePayload:
    """Explicit silence."""

    seconds: float


@dataclass(frozen=True, slots=True)
class DtmfPayload:
    """The far end presses keys (in-band audio and a DTMF event)."""

    digits: str


@dataclass(frozen=True, slots=True)
class HangupPayload:
    """The far end hangs up; the call ends."""


Trigger = AtTrigger | AfterTrigger
Payload = SayPayload | AudioPayload | TonePayload | SilencePayload | DtmfPayload | HangupPayload

_PAYLOAD_KEYS = ("say", "audio", "tone", "silence", "dtmf", "hangup")


class Segment(_Model):
    """One ``callee`` item: exactly one trigger and exactly one payload."""

    at: Seconds | None = None
    after: Literal["previous", "agent_turn", "agent_speech_start", "dtmf"] | None = None
    gap: Seconds | None = None
    timeout: PositiveSeconds | None = None
    digits: DtmfKeys | None = None
    say: Text | None = None
    audio: Path | None = Field(default=None, strict=False)
    tone: Tone | None = None
    silence: PositiveSeconds | None = None
    dtmf: DtmfKeys | None = None
    hangup: Annotated[bool, BeforeValidator(_hangup)] | None = None
    voice: VoiceName | None = None

    @field_validator("audio")
    @classmethod
    def _resolve_audio(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        source = (info.context or {}).get("source_path")
        if value is None or source is None:
            return value
        path = value if value.is_absolute() else Path(source).parent.resolve() / value
        if not path.is_file():
            raise ValueError(f"audio file not found: {str(value)!r} (looked for {path})")
        try:
            sf.info(str(path))
        except (RuntimeError, OSError) as exc:
            reason = " ".join(str(exc).split())
            raise ValueError(f"cannot read audio file {str(value)!r}: {reason}") from None
        return path

    @model_validator(mode="after")
    def _one_trigger_one_payload(self) -> Segment:
        if self.at is None and self.after is None:
            raise FormatProblem(
                "no trigger: add 'at: SECONDS' or "
                "'after: previous|agent_turn|agent_speech_start|dtmf'"
            )
        if self.at is not None and self.after is not None:
            raise FormatProblem("two triggers ('at' and 'after'): give exactly one", "after")
        for key in ("gap", "timeout", "digits"):
            if self.at is not None and getattr(self, key) is not None:
                raise FormatProblem(f"'{key}' only goes with an 'after:' trigger", key)
        if self.digits is not None and self.after != "dtmf":
            raise FormatProblem("'digits' only goes with 'after: dtmf'", "digits")
        payloads = [key for key in _PAYLOAD_KEYS if getattr(self, key) is not None]
        if self.say is not None and self.audio is not None:
            payloads.remove("audio")  # say + audio is one payload: a file and its transcript
        if not payloads:
            raise FormatProblem(f"no payload: add one of {', '.join(_PAYLOAD_KEYS)}")
        if self.voice is not None and (self.say is None or self.audio is not None):
            raise FormatProblem(
                "'voice' only goes with a synthesised 'say' (no 'audio' file)", "voice"
            )
        if len(payloads) > 1:
            raise FormatProblem(
                f"two payloads ({payloads[0]!r} and {payloads[1]!r}): give exactly one "
                "per segment (split it into two segments)",
                payloads[1],
            )
        return self

    @property
    def trigger(self) -> Trigger:
        """The segment's trigger as a typed value (``match`` on it)."""
        if self.at is not None:
            return AtTrigger(self.at)
        assert self.after is not None  # guaranteed by validation
        return AfterTrigger(AfterEvent(self.after), self.gap or 0.0, self.timeout, self.digits)

    @property
    def payload(self) -> Payload:
        """The segment's payload as a typed value (``match`` on it)."""
        if self.say is not None:
            return SayPayload(self.say, self.audio, self.voice)
        if self.audio is not None:
            return AudioPayload(self.audio)
        if self.tone is not None:
            return TonePayload(self.tone.hz, self.tone.seconds, self.tone.level_db)
        if self.silence is not None:
            return SilencePayload(self.silence)
        if self.dtmf is not None:
            return DtmfPayload(self.dtmf)
        return HangupPayload()


class GuardrailExpect(_Model):
    """Expected guardrail outcome counts (see GUARDRAIL_COUNTERS)."""

    blocked_user_turns: Count | None = None
    steered_user_turns: Count | None = None
    blocked_agent_sentences: Count | None = None

    def counters(self) -> dict[str, int]:
        """The counters that were given, by name."""
        return {
            key: value for key in GUARDRAIL_COUNTERS if (value := getattr(self, key)) is not None
        }


class Expect(_Model):
    """What a correct runtime does with the call; every key is optional."""

    amd: FinalAmdCategory | None = None
    amd_stages: tuple[FinalAmdCategory, ...] | None = Field(
        default=None, strict=False, min_length=1
    )
    voicemail_left: bool | None = None
    dtmf: DtmfSent | None = None
    disposition: Disposition | None = None
    guardrail: GuardrailExpect | None = None

    @model_validator(mode="after")
    def _stages_end_in_category(self) -> Expect:
        if self.amd and self.amd_stages and self.amd_stages[-1] != self.amd:
            raise FormatProblem(
                f"the last stage ({self.amd_stages[-1]}) must be the final category "
                f"expect.amd ({self.amd})",
                "amd_stages",
            )
        return self


class RecordedCall(_Model):
    """One recorded call: how the far end answers, what it does, and what to expect.

    ``source_path`` is the YAML file it was loaded from (None when built in code);
    audio paths of a loaded call are already resolved against its folder.
    """

    name: CallName
    description: str = ""
    direction: Direction = "outbound"
    answer: Answer = Answer()
    line: Line | None = None
    callee: tuple[Segment, ...] = Field(default=(), strict=False)
    expect: Expect = Expect()
    max_seconds: PositiveSeconds = 180.0
    agent: dict[str, Any] = Field(default_factory=dict)
    voice: VoiceName | None = None

    _source_path: Path | None = PrivateAttr(default=None)

    @property
    def source_path(self) -> Path | None:
        """The ``*.call.yaml`` file this call was loaded from, if any."""
        return self._source_path

    @property
    def answered(self) -> bool:
        """Whether the call connects (always for inbound calls)."""
        return self.direction == "inbound" or self.answer.status == "answered"

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> RecordedCall:
        source = (info.context or {}).get("source_path")
        if source is not None:
            self._source_path = Path(source)
        if self.direction == "inbound" and "answer" in self.model_fields_set:
            raise FormatProblem("'answer' only applies to outbound calls", "answer")
        if not self.answered and self.callee:
            raise FormatProblem(
                f"a call that is never answered (answer.status: {self.answer.status}) "
                "has no callee segments",
                "callee",
            )
        if not self.answered and self.expect.amd is not None:
            raise FormatProblem("a call that is never answered has no AMD result", "expect", "amd")
        last_at: tuple[int, float] | None = None
        for index, segment in enumerate(self.callee):
            if index and self.callee[index - 1].hangup:
                raise FormatProblem(
                    f"nothing can follow the hangup in callee[{index - 1}]", "callee", index
                )
            if segment.at is None:
                continue
            if last_at is not None and segment.at < last_at[1]:
                raise FormatProblem(
                    f"{segment.at:g} is earlier than callee[{last_at[0]}].at ({last_at[1]:g}); "
                    "segments play in order",
                    "callee",
                    index,
                    "at",
                )
            if segment.at >= self.max_seconds:
                raise FormatProblem(
                    f"{segment.at:g} is not before max_seconds ({self.max_seconds:g})",
                    "callee",
                    index,
                    "at",
                )
            last_at = (index, segment.at)
        return self
