"""AMD settings: every threshold the detector and the call controller use.

Loaded as the ``amd:`` section of an agent config (``agent/app/config.py``), so a
recorded call can override any of them under ``agent: {amd: {...}}`` and the
environment can set them as ``CALLRT_AMD__<KEY>``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["AmdConfig"]


class AmdConfig(BaseModel):
    """Answering-machine detection on outbound calls.

    Times are seconds. The listening window starts at the answer.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Detect on outbound calls (inbound calls never run AMD)."""
    no_speech_timeout: float = Field(default=10.0, gt=0.0, le=120.0)
    """No callee speech at all for this long settles the call as ``uncertain``."""
    hard_timeout: float = Field(default=120.0, gt=0.0, le=600.0)
    """From the answer; new turns cannot extend it. The current stage becomes final."""
    uncertain_action: Literal["human", "hangup"] = "human"
    """What ``uncertain`` at a timeout leads to: talk as to a person, or hang up."""
    human_silence: float = Field(default=0.3, ge=0.1, le=3.0)
    """Silence after a short greeting ("Hello?") that makes the callee a person: the
    session VAD's own silence window (``turn.vad_min_silence``), so in audio the rule
    decides as soon as the VAD reports the end of the speech."""
    long_greeting_silence: float = Field(default=1.0, ge=0.1, le=5.0)
    """Silence needed after a longer greeting that carries no person markers."""
    short_greeting_seconds: float = Field(default=1.2, ge=0.1, le=5.0)
    """A first utterance at most this long, then ``human_silence`` of silence, is
    a person even before its transcript arrives (the "Hello?" rule)."""
    short_greeting_words: int = Field(default=3, ge=1, le=10)
    """A greeting of at most this many words is short."""
    monologue_seconds: float = Field(default=8.0, ge=3.0, le=60.0)
    """Answering the call with speech this long, its pauses shorter than
    ``long_greeting_silence``, is a recording when nothing in its words says person
    or machine: nobody answering a call talks that long before letting us speak. A
    key after a key-like verb in it ("... breath one ...") makes it a menu (0.7);
    otherwise it is a voicemail if a mailbox word survived ("message", "tone"), and
    a menu if not (0.6). A person's phrase in it ("how can I help", "this is Ana")
    keeps it a person, except an offer of help with options read on after it ("How
    can we help you today? ..., put one. For ..., play through!")."""
    welcome_monologue_seconds: float = Field(default=5.0, ge=2.0, le=60.0)
    """``monologue_seconds`` for speech that opens with a business's welcome ("Thank
    you for calling Baxter and Lowe.", "Welcome to ...") or with where we called
    ("You've reached Cedar Valley Clinic."): a receptionist follows either with their
    name or an offer to help, a person's phrase that keeps them a person; a recording
    goes on to what it has to say, and is taken for one from this long, before a
    verdict or over a provisional person's one. The same length holds for an offer
    of help with options read on after it, and for a call that ends on a person's
    verdict the callee never answered us after (``AmdDetector._never_answered``)."""
    human_confirm_window: float = Field(default=6.0, ge=0.0, le=30.0)
    """A fast "person" verdict is provisional this long (or until the callee's next
    turn): a beep or a voicemail take-over phrase in that time corrects it."""
    human_confirm_after_agent: float = Field(default=2.5, ge=0.0, le=30.0)
    """When the confirm window ends while the agent is still talking, the verdict
    is confirmed this long after the agent's turn ends (if nothing corrected it)."""
    beep_wait_after_lean: float = Field(default=1.5, ge=0.0, le=10.0)
    """After a callee turn that leaned voicemail without deciding it (a provisional
    person stands), the person is confirmed no sooner than this long after that
    turn's speech ended: a mailbox's beep follows its greeting within about a
    second, whatever the recogniser made of the greeting."""
    onset_hold: float = Field(default=0.3, ge=0.0, le=1.0)
    """A decision falls due while the callee has just started talking again, before
    the VAD has reported it (its start lags the voice by about a tenth of a second):
    the decision waits while that sound goes on, at most this long from its onset,
    so the callee's next words (a menu after a pause) reach it first. The onset is
    read from the callee's frames: sound at least 12 dB over the pause before it.
    0 decides at once."""
    transcript_grace: float = Field(default=1.5, ge=0.1, le=10.0)
    """How long after speech ends its transcript may take; a person decided on
    timing whose sound brought no words by then is withdrawn (music, noise)."""
    strong_evidence: float = Field(default=0.85, ge=0.0, le=1.0)
    """Confidence a prediction needs to move the call out of a machine stage."""
    history_turns: int = Field(default=4, ge=1, le=20)
    """Callee turns the phrase gate and the classifier read."""
    machine_reply_silence: float = Field(default=1.5, ge=0.0, le=10.0)
    """Continuous callee silence before any reply in a machine stage."""
    vm_silence_without_beep: float = Field(default=1.5, ge=0.0, le=10.0)
    """With no beep, the voicemail message starts after this much silence."""
    beep_gap: float = Field(default=0.15, ge=0.0, le=2.0)
    """Pause between the end of the beep and the voicemail message."""
    beep_min_seconds: float = Field(default=0.15, ge=0.05, le=3.0)
    beep_low_hz: float = Field(default=400.0, ge=100.0, le=4000.0)
    beep_high_hz: float = Field(default=2000.0, ge=200.0, le=4000.0)
    beep_max_seconds: float = Field(default=1.6, ge=0.2, le=5.0)
    """A longer tone is not a beep (ringback, a held note)."""
    beep_quiet_after: float = Field(default=0.25, ge=0.0, le=2.0)
    """A tone counts as a beep only if no other tone follows within this time
    (hold music and ringback are tone sequences)."""
    post_message_wait: float = Field(default=10.0, ge=0.0, le=60.0)
    """After the voicemail message, how long to wait for a post-message menu."""
    max_screening_replies: int = Field(default=2, ge=0, le=10)
    """How many times the agent answers a screener's questions."""
    max_ivr_attempts: int = Field(default=3, ge=1, le=20)
    """Menu turns answered before the call gives up on the IVR."""
    ivr_fallback: Literal["wait", "llm"] = "wait"
    """When no menu option matches the goal: keep listening (the menu repeats or
    routes to an operator), or let the LLM reply with the send_dtmf tool (use
    ``llm`` with a tool-calling model)."""
    classifier: str = "lexical"
    """Classifier for turns the phrase gate and acoustics do not settle:
    ``lexical`` (offline, built in), ``session`` (the agent's own LLM) or a model
    string such as ``openai/gpt-4.1-mini``."""
    classifier_timeout: float = Field(default=2.0, gt=0.0, le=30.0)
    """A slower classifier is ignored and the lexical verdict stands."""

    @field_validator("beep_high_hz")
    @classmethod
    def _above_low(cls, v: float, info: ValidationInfo) -> float:
        low = info.data.get("beep_low_hz")
        if low is not None and v <= low:
            raise ValueError(f"expected a frequency above beep_low_hz ({low} Hz), got {v}")
        return v

    @field_validator("hard_timeout")
    @classmethod
    def _after_no_speech(cls, v: float, info: ValidationInfo) -> float:
        no_speech = info.data.get("no_speech_timeout")
        if no_speech is not None and v < no_speech:
            raise ValueError(f"expected at least no_speech_timeout ({no_speech} s), got {v}")
        return v
