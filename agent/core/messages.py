"""Every message the actors of a call exchange: one discriminated union.

Messages are frozen pydantic models with a ``kind`` literal. Every message
carries ``call_id``; turn-scoped ones carry ``turn_id`` (a callee turn) or
``run_id`` (one agent reply: livekit's speech handle id). ``at`` is the loop
clock (``loop.time()``) when the event happened. Audio never travels as a
message.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Direction = Literal["outbound", "inbound"]
Disposition = Literal[
    "completed",
    "voicemail",
    "unavailable",
    "busy",
    "no-answer",
    "rejected",
    "failed",
    "transferred",
    "error",
]
AnswerStatus = Literal["answered", "busy", "no-answer", "failed", "rejected"]
FinalAmdCategory = Literal[
    "human",
    "machine-vm",
    "machine-unavailable",
    "machine-ivr",
    "machine-screening",
    "uncertain",
]
#: During a call AMD may also report ``wait`` (hold music, "please hold"), never final.
AmdCategory = FinalAmdCategory | Literal["wait"]
GuardrailHook = Literal["on_user_turn", "on_agent_sentence", "on_agent_turn"]
#: Where a turn came from: a phone line or a text channel.
Channel = Literal["voice", "chat"]
RunOutcome = Literal["completed", "interrupted", "aborted", "failed", "no_reply"]
MarkerKind = Literal["call_opening", "end_call", "transfer", "ask_guardian", "invalid"]


class _Msg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    #: travels on actors' urgent lane: never waits behind data (see agent.core.actor)
    urgent: ClassVar[bool] = False
    call_id: str
    at: float = 0.0


# -- telephony / lifecycle -------------------------------------------------


class CallStarted(_Msg):
    kind: Literal["call_started"] = "call_started"
    direction: Direction


class CallAnswered(_Msg):
    """The far end picked up (outbound) or we answered (inbound); media flows."""

    kind: Literal["call_answered"] = "call_answered"


class CallNotAnswered(_Msg):
    """An outbound call that never connected."""

    kind: Literal["call_not_answered"] = "call_not_answered"
    status: AnswerStatus


class RemoteHangup(_Msg):
    kind: Literal["remote_hangup"] = "remote_hangup"
    urgent: ClassVar[bool] = True


class CallEnded(_Msg):
    kind: Literal["call_ended"] = "call_ended"
    urgent: ClassVar[bool] = True
    disposition: Disposition
    reason: str


class ActorCrashed(_Msg):
    kind: Literal["actor_crashed"] = "actor_crashed"
    actor: str
    error: str


class ModelFailed(_Msg):
    """A model of the session failed in a way livekit does not retry (its error event
    with ``recoverable`` false): the call may go on deaf (STT), silent (LLM, TTS) or
    end. ``model`` is ``stt``, ``llm``, ``tts`` or ``other``; ``error`` the exception's
    class name (never its message, which may quote what the caller said)."""

    kind: Literal["model_failed"] = "model_failed"
    model: str
    error: str


# -- session events --------------------------------------------------------


class UserSpeechStarted(_Msg):
    kind: Literal["user_speech_started"] = "user_speech_started"


class UserSpeechStopped(_Msg):
    kind: Literal["user_speech_stopped"] = "user_speech_stopped"


class UserTranscript(_Msg):
    kind: Literal["user_transcript"] = "user_transcript"
    turn_id: str
    text: str
    final: bool


class ChannelContext(BaseModel):
    """Who a turn came from: the channel, the caller's number, whether they are verified."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    channel: Channel = "voice"
    caller_number: str | None = None
    verified: bool = False


class UserTurnCompleted(_Msg):
    kind: Literal["user_turn_completed"] = "user_turn_completed"
    turn_id: str
    text: str
    started_at: float | None = None
    context: ChannelContext | None = None


class TurnSettled(_Msg):
    """A run (one agent reply) or a callee turn that got no reply is over, whatever happened.

    Every run the session starts settles exactly once: ``completed``,
    ``interrupted`` (barge-in or a controller interrupt), ``aborted`` (the call
    was torn down first), ``failed`` (the reply raised). A callee turn that
    gets no reply (a guardrail block, a closed reply gate) settles ``no_reply``.
    """

    kind: Literal["turn_settled"] = "turn_settled"
    turn_id: str | None = None
    run_id: str | None = None
    outcome: RunOutcome
    text: str = ""


class AgentSpeechStarted(_Msg):
    kind: Literal["agent_speech_started"] = "agent_speech_started"
    run_id: str


class AgentSentence(_Msg):
    """One agent sentence, as released from the LLM text stream to TTS."""

    kind: Literal["agent_sentence"] = "agent_sentence"
    run_id: str
    index: int
    text: str


class AgentTurnCompleted(_Msg):
    kind: Literal["agent_turn_completed"] = "agent_turn_completed"
    run_id: str
    text: str
    interrupted: bool
    started_at: float | None = None


#: The milestones of a reply, in pipeline order (see :class:`TurnLatency`).
LATENCY_MILESTONES: tuple[str, ...] = (
    "audio_end",
    "vad_end",
    "stt_final",
    "committed",
    "llm_request",
    "llm_first_token",
    "first_sentence",
    "tts_first_audio",
    "first_audio",
)
#: The stages of a reply's latency: each ends at the milestone of the same index + 1.
LATENCY_STAGES: tuple[str, ...] = (
    "vad",
    "stt",
    "endpointing",
    "llm_request",
    "llm_first_token",
    "first_sentence",
    "tts",
    "playout",
)
LatencyClock = Literal["wall", "virtual"]


class TurnLatency(_Msg):
    """Where the time went between the end of a callee turn and the agent's first audio.

    Every field but ``first_audio`` is a milestone on the call's clock (``loop.time()``),
    ``None`` where it does not apply or was not seen: ``audio_end`` is known only to a
    line that plays the callee's audio itself (the simulator); ``vad_end`` only where a
    VAD ends speech (not in text-only replays). With preemptive generation the LLM and
    TTS milestones may come before ``committed``; :meth:`stages` charges each stage only
    with the time it added to the critical path.
    """

    kind: Literal["turn_latency"] = "turn_latency"
    turn_id: str
    run_id: str
    #: "virtual" when the call ran on a virtual clock: models take no time there
    clock: LatencyClock = "wall"
    #: the reply was generated preemptively (before the turn was committed) and kept
    preemptive: bool = False
    audio_end: float | None = None
    vad_end: float | None = None
    stt_final: float | None = None
    committed: float | None = None
    llm_request: float | None = None
    llm_first_token: float | None = None
    first_sentence: float | None = None
    tts_first_audio: float | None = None
    first_audio: float
    #: prompt tokens of the reply's first LLM request, and how many came from the cache
    prompt_tokens: int | None = None
    cached_tokens: int | None = None

    def origin(self) -> float:
        """Where the turn's latency starts: the end of the callee's audio where known."""
        for name in LATENCY_MILESTONES[:4]:
            value = getattr(self, name)
            if value is not None:
                return float(value)
        return self.first_audio

    def stages(self) -> dict[str, float]:
        """Seconds each stage added to the critical path; they sum to :meth:`total`.

        A stage ends at its milestone; it is charged with the time from the latest
        milestone before it (the running maximum) to its own, or 0 when its milestone is
        missing or already passed (work that overlapped an earlier stage costs nothing)
        or came after the first audio (it was not waited for: e.g. a transcript that
        arrived while a reply the controller started early was already playing).
        """
        out: dict[str, float] = {}
        reached = self.origin()
        for stage, name in zip(LATENCY_STAGES, LATENCY_MILESTONES[1:], strict=True):
            value = getattr(self, name)
            if value is None or value <= reached or value > self.first_audio:
                out[stage] = 0.0
                continue
            out[stage] = value - reached
            reached = value
        return out

    def total(self) -> float:
        """From the origin (the callee's audio end where known) to the first agent audio."""
        return max(0.0, self.first_audio - self.origin())


class PlaybackFinished(_Msg):
    kind: Literal["playback_finished"] = "playback_finished"
    run_id: str | None
    position: float
    interrupted: bool


class DtmfReceived(_Msg):
    kind: Literal["dtmf_received"] = "dtmf_received"
    digits: str


class DtmfSent(_Msg):
    kind: Literal["dtmf_sent"] = "dtmf_sent"
    digits: str


# -- commands to the session (asked or told) -------------------------------


class Say(_Msg):
    kind: Literal["say"] = "say"
    text: str
    allow_interruptions: bool = True


class GenerateReply(_Msg):
    """Reply now. ``protect``: the callee's turn still being committed (its words
    were heard before this reply) must not cut it; only new callee speech may.
    ``opening``: this is the call's opening turn; the model sees the user turn
    ``[CALL_OPENING]``, which is never saved in the history."""

    kind: Literal["generate_reply"] = "generate_reply"
    instructions: str | None = None
    user_input: str | None = None
    protect: bool = False
    opening: bool = False


class InterruptRun(_Msg):
    """Interrupt one agent run; a stale run id never interrupts a newer run."""

    kind: Literal["interrupt_run"] = "interrupt_run"
    urgent: ClassVar[bool] = True
    run_id: str


class SendDtmf(_Msg):
    kind: Literal["send_dtmf"] = "send_dtmf"
    digits: str


class HangUp(_Msg):
    """End the call. ``graceful`` lets the agent's reply in flight finish playing first."""

    kind: Literal["hang_up"] = "hang_up"
    urgent: ClassVar[bool] = True
    reason: str = "agent"
    graceful: bool = False


class Transfer(_Msg):
    """Hand the call to ``destination`` (a number or SIP URI) once the reply in flight has played.

    ``target`` is the name the agent used (``[TRANSFER:billing]``).
    """

    kind: Literal["transfer"] = "transfer"
    urgent: ClassVar[bool] = True
    target: str
    destination: str


# -- controller, AMD, guardrails -------------------------------------------


class CallStateChanged(_Msg):
    kind: Literal["call_state_changed"] = "call_state_changed"
    old: str
    new: str


class TimerFired(_Msg):
    """An actor's own timer, delivered through its mailbox."""

    kind: Literal["timer_fired"] = "timer_fired"
    name: str


class AmdPrediction(_Msg):
    """AMD's classification of one callee turn (or of a tone, or of a timeout).

    ``category`` is what this turn looks like; ``stage`` is the call's stage
    after applying it (a rejected prediction leaves the stage unchanged).
    ``provisional`` marks a fast "person" verdict that a beep or a voicemail
    phrase may still correct within the confirm window. ``asks`` is true when
    the turn asks the caller for something (a name, a reason, a message, a
    key). ``delay`` is seconds from the end of the callee's speech to the
    prediction.
    """

    kind: Literal["amd_prediction"] = "amd_prediction"
    category: AmdCategory
    stage: FinalAmdCategory = "uncertain"
    final: bool = False
    reason: str = ""
    turn_id: str | None = None
    turn: int = 0
    confidence: float = 0.0
    transcript: str = ""
    delay: float | None = None
    evidence: tuple[str, ...] = ()
    provisional: bool = False
    changed: bool = False
    asks: bool = False


class AmdCompleted(_Msg):
    """AMD is done: the call's final category, its stage sequence and when it was reached."""

    kind: Literal["amd_completed"] = "amd_completed"
    category: FinalAmdCategory
    stages: tuple[FinalAmdCategory, ...] = ()
    decided_at: float | None = None
    reason: str = ""


class AmdTone(_Msg):
    """A tone AMD heard on the callee's side: a voicemail ``beep``, a ``sit`` tri-tone,
    or a ``ringback`` (the line ringing again: a menu or a screener put the call through)."""

    kind: Literal["amd_tone"] = "amd_tone"
    tone: Literal["beep", "sit", "ringback"]
    start: float
    end: float
    hz: tuple[float, ...] = ()


class VoicemailLeft(_Msg):
    """The voicemail message finished playing, uninterrupted."""

    kind: Literal["voicemail_left"] = "voicemail_left"
    run_id: str


class ControlMarkerSeen(_Msg):
    """A control marker the LLM wrote in run ``run_id`` (stripped from what is spoken)."""

    kind: Literal["control_marker"] = "control_marker"
    run_id: str
    marker: MarkerKind
    arg: str | None = None


class CallTransferred(_Msg):
    """The line handed the call over; the call is over for the agent."""

    kind: Literal["call_transferred"] = "call_transferred"
    target: str


class CallerVerified(_Msg):
    """The caller proved they are the guardian; later turns carry ``verified``."""

    kind: Literal["caller_verified"] = "caller_verified"
    method: Literal["caller_id", "pin", "passphrase", "dtmf"]


class GuardianQuestion(_Msg):
    """A question for the guardian (``[ASK_GUARDIAN:...]``) was asked, answered or closed."""

    kind: Literal["guardian_question"] = "guardian_question"
    question_id: str
    status: Literal["pending", "answered", "timed_out", "cancelled"]
    question: str = ""
    answer: str | None = None


class ToolCallReviewed(_Msg):
    """What the trust policy and the tool gate decided about one tool call.

    ``proposed`` is the policy's decision, ``would`` what the gate in mode ``on``
    would make of it, ``decision`` what happened. ``reason`` says why in a word.
    """

    kind: Literal["tool_call_reviewed"] = "tool_call_reviewed"
    tool: str
    decision: Literal["allow", "ask", "deny"]
    proposed: Literal["allow", "ask", "deny"]
    would: Literal["allow", "ask", "deny"]
    reason: str
    gate_mode: str = "off"
    values: dict[str, float] = Field(default_factory=dict)
    run_id: str | None = None


class WatchdogVerdict(_Msg):
    """One watchdog ballot: flags it acts on and flags it only logs (0..1 each)."""

    kind: Literal["watchdog_verdict"] = "watchdog_verdict"
    act: dict[str, float] = Field(default_factory=dict)
    logged: dict[str, float] = Field(default_factory=dict)
    source: str = ""
    mode: str = "on"
    interrupted_run: str | None = None


class SetTools(_Msg):
    """Which call-control tools the LLM may use in its next replies."""

    kind: Literal["set_tools"] = "set_tools"
    end_call: bool = True
    send_dtmf: bool = False


class GuardrailCheck(_Msg):
    """A session hook asks the guardrail (reply: allow, block or steer)."""

    kind: Literal["guardrail_check"] = "guardrail_check"
    hook: GuardrailHook
    text: str
    turn_id: str | None = None
    run_id: str | None = None
    index: int | None = None


class GuardrailEvaluated(_Msg):
    """One guardrail evaluation: a hook's checks (or a reply's response guardrails).

    ``decisions`` holds each decision's value, ``errors`` why a check failed (its
    ``on_error`` then decided the action), ``eager`` whether a user turn's eager
    result was ``ready``, ``pending`` or a ``miss`` at the end of the turn.
    """

    kind: Literal["guardrail_evaluated"] = "guardrail_evaluated"
    hook: GuardrailHook
    action: Literal["allow", "block", "steer"]
    decisions: dict[str, float | str | bool] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    latency: float = 0.0
    turn_id: str | None = None
    run_id: str | None = None
    index: int | None = None
    eager: Literal["ready", "pending", "miss"] | None = None
    end_call: bool = False
    #: "decision" (DecisionGuardrail checks) or "response" (response guardrails)
    source: Literal["decision", "response"] = "decision"


class ResponseCheck(_Msg):
    """The session asks the response guardrails about a whole agent reply."""

    kind: Literal["response_check"] = "response_check"
    text: str
    run_id: str | None = None
    user_text: str = ""


Message = Annotated[
    CallStarted
    | CallAnswered
    | CallNotAnswered
    | RemoteHangup
    | CallEnded
    | ActorCrashed
    | ModelFailed
    | UserSpeechStarted
    | UserSpeechStopped
    | UserTranscript
    | UserTurnCompleted
    | TurnSettled
    | AgentSpeechStarted
    | AgentSentence
    | AgentTurnCompleted
    | TurnLatency
    | PlaybackFinished
    | DtmfReceived
    | DtmfSent
    | Say
    | GenerateReply
    | InterruptRun
    | SendDtmf
    | HangUp
    | Transfer
    | CallStateChanged
    | TimerFired
    | AmdPrediction
    | AmdCompleted
    | AmdTone
    | VoicemailLeft
    | ControlMarkerSeen
    | CallTransferred
    | CallerVerified
    | GuardianQuestion
    | ToolCallReviewed
    | WatchdogVerdict
    | SetTools
    | GuardrailCheck
    | GuardrailEvaluated
    | ResponseCheck,
    Field(discriminator="kind"),
]

message_adapter: TypeAdapter[Message] = TypeAdapter(Message)

#: Kinds that travel on actors' urgent lanes (the classes marked ``urgent``).
URGENT_KINDS = frozenset(
    cls.model_fields["kind"].default
    for cls in (RemoteHangup, CallEnded, InterruptRun, HangUp, Transfer)
    if cls.urgent
)
