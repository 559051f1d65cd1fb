"""The AMD policy: turns, evidence, timers and the stage, with no asyncio and no I/O.

:class:`AmdDetector` is fed events with their times (the answer, callee speech
start/stop, final transcripts, beeps and SIT tones, the agent's turns and DTMF,
classifier answers and its own timers) and returns :class:`Output` items: the
predictions to publish, timers to arm or cancel, classifier requests and the
completion. The AMD actor (``amd/actor.py``) carries them out.

Evidence, cheapest first:

1. **Tones**: a beep is strong ``machine-vm``; a SIT tri-tone is strong
   ``machine-unavailable``. Both are decided the moment they are heard.
2. **Phrases** (``amd/phrases.py``) over the rolling window of callee turns,
   as soon as each final transcript arrives. Strong phrases decide at once;
   ``wait`` phrases are reported but keep the stage.
3. **Timing and the classifier**: a turn without strong phrases is settled
   once the callee has been silent long enough: ``human_silence`` after a
   short greeting or a turn with person markers ("Hello?", "Kelly speaking,
   how can I help?"), ``long_greeting_silence`` otherwise. The classifier
   (``amd/classifier.py``, behind livekit's ``DecisionModel``) answers those.
   A "person" answer about a monologue of ``monologue_seconds`` from the answer
   (``welcome_monologue_seconds`` when it opens with a business's welcome),
   with no pause for us and no person's phrase in it, is a recording whose words
   the recogniser lost (see :meth:`AmdDetector._monologue`).

A fast "person" verdict is **provisional**: the controller starts talking at
once, but the stage machine records ``human`` (terminal) only when the
callee's next turn shows no voicemail evidence, or when the confirm window
passes. A beep, a SIT or a strong voicemail/unavailable phrase in that window
corrects it ("Hello? ... gotcha, leave a message"; a short greeting whose beep
comes late).

Timeouts: no callee words for ``no_speech_timeout`` settles the call as
``uncertain``; ``hard_timeout`` from the answer makes the current stage final.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.core.messages import AmdCategory, FinalAmdCategory
from agent.core.timers import ArmTimer, CancelTimer

from .classifier import (
    HANDED_OVER_FROM,
    announces_transfer,
    offers_then_options,
    person_markers,
    rang_before_latest,
)
from .config import AmdConfig
from .cues import opens_with_welcome, opens_with_where_we_called
from .fsm import Prediction, StageMachine
from .menu_shapes import keyed_option
from .phrases import (
    HINT_WEIGHT,
    IVR_REPROMPTS,
    SCREENER_ASKS,
    PhraseVerdict,
    classify_phrases,
    is_acknowledgment,
    match,
    normalise,
    words,
)

__all__ = [
    "AmdDetector",
    "Predicted",
    "Completed",
    "ArmTimer",
    "CancelTimer",
    "Classify",
    "Output",
    "ASK_PHRASES",
]

#: Phrases by which a machine asks the caller for something (a reply is due).
ASK_PHRASES: frozenset[str] = frozenset(
    {
        "record your name",
        "reason for calling",
        "state your name",
        "say your name",
        "why you are calling",
        "who is calling",
        "what is this regarding",
        "asking for more information",
        "press {d} for",
        "press {d} to",
        "or press {d}",
        "for {w} press",
        "for {w} {w} press",
        "say or press",
        "press the pound key",
        "press pound",
        "dial the extension",
        "know your party's extension",
        "to speak to a representative",
        "to speak with a representative",
    }
)

_NOISE = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|[♪♫]")


@dataclass(frozen=True)
class Predicted:
    """A prediction to publish (see ``agent.core.messages.AmdPrediction``)."""

    turn: int
    category: AmdCategory
    stage: FinalAmdCategory
    confidence: float
    reason: str
    evidence: tuple[str, ...]
    transcript: str
    at: float
    delay: float | None
    provisional: bool = False
    changed: bool = False
    asks: bool = False


@dataclass(frozen=True)
class Completed:
    """AMD is done."""

    category: FinalAmdCategory
    stages: tuple[FinalAmdCategory, ...]
    decided_at: float | None
    reason: str


@dataclass(frozen=True)
class Classify:
    """Ask the classifier about ``turn``; answer with :meth:`AmdDetector.classified`."""

    turn: int
    stage: FinalAmdCategory
    turns: tuple[tuple[str, str], ...]
    dtmf: str


Output = Predicted | Completed | ArmTimer | CancelTimer | Classify


def clean_transcript(text: str) -> str:
    """Drops recogniser annotations such as ``[MUSIC]`` or ``(upbeat music)``."""
    return " ".join(_NOISE.sub(" ", text).split())


@dataclass
class _Turn:
    index: int
    text: str
    start: float | None
    end: float | None = None
    settled: bool = False
    verdict: PhraseVerdict | None = None
    #: the callee started this turn while the agent was talking (a recording
    #: talks on regardless; a person answering us waits for our turn to end)
    overlapped: bool = False
    #: its speech began under ``long_greeting_silence`` after the callee's speech
    #: before it, the agent silent since that began: no pause was left for us
    follows_on: bool = False


@dataclass
class _State:
    answered_at: float | None = None
    speaking: bool = False
    speech_start: float | None = None
    last_speech_end: float | None = None
    heard_words: bool = False
    turns: list[_Turn] = field(default_factory=list)
    context: list[tuple[str, str]] = field(default_factory=list)  # (role, text), all roles
    dtmf: str = ""
    provisional_at: float | None = None
    provisional_turn: int | None = None
    agent_spoke_since_provisional: bool = False
    #: when the agent first spoke after the provisional verdict
    agent_spoke_at: float | None = None
    agent_speaking: bool = False
    #: when the agent last started to speak
    agent_started_at: float | None = None
    speech_overlaps_agent: bool = False
    #: the current speech began with no pause left for us (see ``_Turn.follows_on``)
    speech_follows_on: bool = False
    #: when each of the agent's turns ended
    agent_ends: list[float] = field(default_factory=list)
    #: when the speech of the latest turn that leaned voicemail under a provisional
    #: person ended (a beep may still follow it)
    vm_lean_end: float | None = None
    confirm_due: bool = False
    #: end of the latest speech whose transcript has not arrived yet
    words_pending_since: float | None = None
    #: every stretch of callee speech the VAD heard, ``(start, end)``, transcribed or
    #: not: a piece the recogniser gave no words for is still no pause
    speech_spans: list[tuple[float, float]] = field(default_factory=list)
    provisional_from_timing: bool = False
    decided_at: float | None = None
    done: bool = False


class AmdDetector:
    """The AMD policy for one call.

    Args:
        config: Thresholds.
    """

    def __init__(self, config: AmdConfig | None = None) -> None:
        self.cfg = config or AmdConfig()
        self.fsm = StageMachine(strong=self.cfg.strong_evidence)
        self.s = _State()

    # -- queries -----------------------------------------------------------------

    @property
    def stage(self) -> FinalAmdCategory:
        """The stage the controller should act on (a provisional person counts)."""
        if self.s.provisional_at is not None:
            return "human"
        return self.fsm.stage

    @property
    def done(self) -> bool:
        return self.s.done

    @property
    def provisional(self) -> bool:
        return self.s.provisional_at is not None

    # -- events ------------------------------------------------------------------

    def answered(self, t: float) -> list[Output]:
        """The call was answered: the listening window starts."""
        self.s.answered_at = t
        return [
            ArmTimer("no_speech", t + self.cfg.no_speech_timeout),
            ArmTimer("hard", t + self.cfg.hard_timeout),
        ]

    def speech_started(self, t: float) -> list[Output]:
        s = self.s
        if s.done or s.answered_at is None:
            return []
        s.speaking = True
        # the recogniser's VAD cuts a recording that talks on into pieces: a piece
        # that follows one said over us within the long-greeting pause, with the
        # agent silent since, was said over us too ("Thank you for calling X."
        # then a menu that started as we answered and went on once we stopped)
        continues = (
            s.speech_overlaps_agent
            and s.last_speech_end is not None
            and t - s.last_speech_end <= self.cfg.long_greeting_silence
            and (
                s.agent_started_at is None
                or s.speech_start is None
                or s.agent_started_at <= s.speech_start
            )
        )
        s.speech_follows_on = (
            s.last_speech_end is not None
            and t - s.last_speech_end < self.cfg.long_greeting_silence
            and not s.agent_speaking
            and (
                s.agent_started_at is None
                or (s.speech_start is not None and s.agent_started_at < s.speech_start)
            )
        )
        s.speech_start = t
        s.speech_overlaps_agent = s.agent_speaking or continues
        if not s.heard_words:
            s.heard_words = True  # a long greeting may take longer than the timeout
            return [CancelTimer("settle"), CancelTimer("no_speech")]
        return [CancelTimer("settle")]

    def speech_stopped(self, t: float, speech_end: float) -> list[Output]:
        """The callee stopped talking; ``speech_end`` is when the voice ended."""
        s = self.s
        if s.done or s.answered_at is None:
            return []
        s.speaking = False
        s.last_speech_end = max(speech_end, s.answered_at)
        s.words_pending_since = s.last_speech_end
        if s.speech_start is not None:
            s.speech_spans.append((s.speech_start, s.last_speech_end))
        for turn in s.turns:
            if not turn.settled and turn.end is None:
                turn.end = s.last_speech_end
        return [*self._arm_settle(), *self._maybe_confirm(t)]

    def transcript(self, t: float, text: str, readings: Sequence[str] = ()) -> list[Output]:
        """A final transcript of callee speech.

        Args:
            t: Now.
            text: The final transcript.
            readings: The interim readings of the same utterance, if any. Each is
                another decode of the same audio, and Whisper's final pass sometimes
                loses what one of them read ("... find us online at baygas.com" where
                an interim had "..., press one now"; "The moment for new economy is
                reached" where one had "The mobile phone you are calling is switched
                off"); a menu or a carrier's state read in any of them counts.
        """
        s = self.s
        text = clean_transcript(text)
        if s.done or s.answered_at is None or not normalise(text):
            return []
        out: list[Output] = []
        s.words_pending_since = None
        if not s.heard_words:
            s.heard_words = True
            out.append(CancelTimer("no_speech"))
        index = len(s.turns)
        turn = _Turn(
            index,
            text,
            start=s.speech_start,
            end=None if s.speaking else (s.last_speech_end if s.last_speech_end else t),
            overlapped=s.speech_overlaps_agent,
            follows_on=s.speech_follows_on,
        )
        s.turns.append(turn)
        s.context.append(("callee", text))
        # phrases in this turn; a phrase the recogniser split across two segments
        # ("please leave" / "a message after the tone") is read from the pair
        turn.verdict = classify_phrases([text], window=1)
        weak = turn.verdict is None or turn.verdict.strength <= HINT_WEIGHT
        screener = turn.verdict is not None and turn.verdict.category == "machine-screening"
        pair = (
            classify_phrases([f"{s.turns[index - 1].text} {text}"], window=1)
            if index > 0 and (weak or screener)
            else None
        )
        if weak and pair is not None and pair.strength > HINT_WEIGHT:
            before = classify_phrases([s.turns[index - 1].text], window=1)
            if before is None or set(pair.phrases) - set(before.phrases):
                turn.verdict = pair
        if (
            screener
            and pair is not None
            and pair.category == "machine-ivr"
            and pair.strength > HINT_WEIGHT
            and (turn.start == s.turns[index - 1].start or turn.follows_on)
        ):
            # pieces of one stretch of speech: "Welcome to Sky Cable." then "Tell me
            # why you're calling": a business's welcome before the question
            # makes it a speech menu's prompt, which the pair reads (amd/cues.py)
            turn.verdict = pair
        if turn.verdict is None or turn.verdict.strength <= HINT_WEIGHT:
            turn.verdict = _read_in_interims(readings, text, turn.verdict) or turn.verdict
        if turn.verdict is not None and turn.verdict.strength > HINT_WEIGHT:
            turn.settled = True
            out += self._predict_phrase(t, turn)
            return out
        out += self._arm_settle()
        return out

    def tone(self, t: float, kind: str, start: float, end: float) -> list[Output]:
        """A beep, a SIT tri-tone or a ringback was heard (times in loop time)."""
        s = self.s
        if s.done or s.answered_at is None or end < s.answered_at:
            return []
        if kind == "ringback":
            # the line rings again: the classifier reads it in the history (whoever
            # speaks next picked up); one entry per ringing, however many bursts
            if not s.context or s.context[-1] != ("tone", "ringback"):
                s.context.append(("tone", "ringback"))
            return []
        if kind == "sit":
            return self._predict(
                t,
                self._tone_turn(),
                "machine-unavailable",
                0.97,
                "tone: special information tri-tone",
                ("sit",),
                "",
                None,
            )
        if self.fsm.stage == "machine-screening" and self._screener_announced_tone():
            # "say your name after the tone": the screener's own prompt tone
            return self._predict(
                t,
                self._tone_turn(),
                "wait",
                0.9,
                "tone: the screener's prompt tone",
                ("beep",),
                "",
                None,
                asks=True,
            )
        return self._predict(
            t, self._tone_turn(), "machine-vm", 0.95, "tone: beep", ("beep",), "", None
        )

    def agent_turn(self, t: float, text: str) -> list[Output]:
        s = self.s
        s.agent_speaking = False
        s.agent_ends.append(t)
        if text:
            s.context.append(("agent", text))
        if s.provisional_at is not None and s.confirm_due:
            # the window ended while we talked: give the callee a moment to answer
            s.confirm_due = False
            return [ArmTimer("confirm", t + self.cfg.human_confirm_after_agent)]
        return []

    def agent_speech_started(self, t: float) -> list[Output]:
        self.s.agent_speaking = True
        self.s.agent_started_at = t
        if self.s.provisional_at is not None:
            self.s.agent_spoke_since_provisional = True
            if self.s.agent_spoke_at is None:
                self.s.agent_spoke_at = t
        return []

    def voicemail_left(self, t: float) -> list[Output]:
        """The voicemail message was played to the end: the call was a voicemail."""
        if self.s.done:
            return []
        if self.fsm.stage != "machine-vm":
            self.fsm.apply(Prediction(max(0, self.fsm.latest_turn), "machine-vm", 1.0, "left"))
        return self._complete(t, "machine-vm", "voicemail message left")

    def dtmf_sent(self, t: float, digits: str) -> list[Output]:
        self.s.dtmf += digits
        self.s.context.append(("dtmf", digits))
        return []

    def classified(
        self, t: float, turn: int, category: str, confidence: float, reason: str
    ) -> list[Output]:
        """The classifier's answer for ``turn`` (a late answer for a superseded turn is dropped)."""
        s = self.s
        if s.done or turn >= len(s.turns) or turn < self.fsm.latest_turn:
            return []
        if turn != len(s.turns) - 1:
            return []  # a newer turn arrived while the classifier thought
        cat: AmdCategory = category if category in _CATEGORIES else "wait"  # type: ignore[assignment]
        tr = s.turns[turn]
        span = self._monologue(tr) if cat == "human" else None
        over_us = self._run_over_us(tr) if cat == "human" and span is None else None
        if cat == "machine-vm" and confidence < self.cfg.strong_evidence:
            # (the full monologue_seconds: "You've reached X" is what leans it to a
            # mailbox, and a short greeting that says no more is one)
            opened = self._monologue(tr, announced=False)
            said = " ".join(x.text for x in s.turns[: tr.index + 1]) if opened else ""
            if opened is not None and _only_an_opening(said) and not person_markers(said):
                # "You've reached X." opens a menu as often as a mailbox: a long
                # recording that asks for no message is taken for a menu, the harmless
                # mistake (a beep or a mailbox phrase still makes it a voicemail)
                cat, confidence = "machine-ivr", 0.7 if keyed_option(words(said)) else 0.6
                reason = (
                    f"a {opened:.1f} s recording answering the call that opens like a "
                    f"mailbox but asks for no message; {reason}"
                )
        if cat == "human" and self.fsm.stage == "machine-screening" and self._in_breath(tr):
            # a screener talks until it has asked ("I'm a call assistant for Jamie. Can
            # I ask who's calling?"), then waits for us: words in the same breath as
            # its own, before we answered, are still the screener's, whatever the
            # recogniser made of them ("Can I ask, oh calling, ...?")
            confidence = min(confidence, 0.7)
            reason = f"said in the screener's breath, before we answered; {reason}"
        elif cat == "human" and self.fsm.stage == "machine-screening" and self._conversing(tr):
            # a screener asks once, and once answered puts the call through, takes a
            # message or hangs up, each in words of its own: a callee who talks twice
            # after we answered, with no machine's words, is the person, whatever the
            # recogniser made of their greeting ("below, so I need to learn" for
            # "Hello? Hi, this is Lauren")
            confidence = max(confidence, self.cfg.strong_evidence)
            reason = (
                f"spoke twice after we answered the screener, no machine's words in "
                f"either; {reason}"
            )
        if span is not None or over_us is not None:
            # the classifier heard no machine words, but nobody answering a call talks
            # this long before letting us speak, nor goes on after a person's verdict
            # without waiting for us: a recording whose words were lost
            said = " ".join(x.text for x in s.turns[: tr.index + 1])
            tokens = words(said)
            keyed = keyed_option(tokens)
            # a person's offer of help holds the person only if they waited after it:
            # options read on after it are a bank's greeting and its menu
            since = self._said_since_verdict(tr) if over_us is not None else said
            read_on = offers_then_options(since)
            held = "read options on after an offer of help" if read_on else "nothing a person says"
            if over_us is not None and (read_on or not person_markers(since)):
                # a greeting, a pause that gave the verdict, then a menu said before we
                # spoke or over us: timing is the strong evidence that corrects it. A
                # person's phrase before the verdict does not hold it ("How can we help
                # you today? For checking, press 1."): a person who asks waits for us
                cat = "machine-ivr" if keyed else _unkeyed_recording(tokens)
                confidence = self.cfg.strong_evidence
                reason = (
                    f"went on for {over_us:.1f} s from the answer without waiting for "
                    f"us, {held} after the verdict; {reason}"
                )
            elif span is not None and keyed:
                cat, confidence = "machine-ivr", 0.7
                reason = f"a {span:.1f} s monologue answering the call, a key in it; {reason}"
            elif span is not None and (read_on or not person_markers(said)):
                cat, confidence = _unkeyed_recording(tokens), 0.6
                reason = f"a {span:.1f} s monologue answering the call, {held} in it; {reason}"
        if cat == "machine-vm" and s.provisional_at is not None:
            s.vm_lean_end = tr.end if tr.end is not None else t
        if cat == "human" and self.fsm.stage == "uncertain":
            # a fast person verdict needs the short-silence rule or person markers;
            # otherwise the long silence must have passed
            needed = self._settle_wait(tr, confidence)
            end = tr.end if tr.end is not None else t
            if s.speaking or t + 1e-6 < end + needed:
                return []  # not yet: the settle timer fires again
            wait_words = self._words_pending_after(tr, t)
            if wait_words is not None:
                return [ArmTimer("settle", wait_words)]
        tr.settled = True
        return self._predict(
            t,
            turn,
            cat,
            confidence,
            reason,
            ("classifier",),
            tr.text,
            _delay(t, tr.end),
        )

    def timer(self, t: float, name: str) -> list[Output]:
        s = self.s
        if s.done:
            return []
        match name:
            case "settle":
                return self._settle(t)
            case "confirm":
                if s.provisional_at is None:
                    return []
                s.confirm_due = True
                if s.agent_speaking:
                    return []  # re-armed when the agent's turn ends
                return self._maybe_confirm(t)
            case "words":
                return self._check_words(t)
            case "no_speech":
                if not s.heard_words and self.fsm.stage == "uncertain":
                    return self._complete(t, "uncertain", "no speech")
                return []
            case "hard":
                if s.provisional_at is not None:
                    return self._confirm(t, "hard timeout")
                return self._complete(t, self.fsm.stage, "hard timeout")
        return []

    def call_ended(self, t: float, readings: Sequence[str] = ()) -> list[Output]:
        """The call is over: whatever the stage is now is final.

        Args:
            t: Now.
            readings: Interim readings of an utterance whose final transcript had not
                come when the line closed. A carrier's short announcement ends in a
                hang-up, and the recogniser may still be decoding it ("The mailbox is
                full and cannot accept any messages. Goodbye.", hung up 0.8 s after):
                the latest reading stands in for its final transcript, and a strong
                phrase in any of them still decides the call.
        """
        s = self.s
        if s.done:
            return []
        out: list[Output] = []
        if readings:
            out += self.transcript(t, readings[-1], readings=readings)
            if s.done:
                return out
        if s.provisional_at is not None:
            return out + (self._never_answered(t) or self._confirm(t, "call ended"))
        return out + self._complete(t, self.fsm.stage, "call ended")

    # -- internals ---------------------------------------------------------------

    def _never_answered(self, t: float) -> list[Output]:
        """The call ended on a provisional person who never answered us: a recording,
        if everything the callee said was one run from the answer, before the agent
        spoke or over it, of ``welcome_monologue_seconds`` or more, with no person's
        phrase in it (a menu that read its prompt, waited for a key and hung up);
        otherwise nothing (the person is confirmed).

        A person who picks up and talks that long without a person's word, then hangs
        up without a word to what we said, is rare; a recording never answers us.
        """
        s = self.s
        if self.fsm.stage != "uncertain" or not s.turns or s.provisional_turn is None:
            return []
        last = s.turns[-1]
        span = self._run(
            last,
            self.cfg.long_greeting_silence,
            over_us=True,
            seconds=self.cfg.welcome_monologue_seconds,
        )
        said = " ".join(x.text for x in s.turns)
        if span is None or person_markers(said):
            return []
        tokens = words(said)
        category: AmdCategory = (
            "machine-ivr" if keyed_option(tokens) else _unkeyed_recording(tokens)
        )
        why = (
            f"the call ended on a {span:.1f} s recording answering the call, which never "
            "answered us, with nothing a person says in it"
        )
        out = self._predict(
            t,
            last.index,
            category,
            self.cfg.strong_evidence,
            why,
            ("timing",),
            last.text,
            None,
        )
        return out + self._complete(t, self.fsm.stage, why)

    def _timing_rule(self, t: float) -> list[Output]:
        """ "Hello?" then silence: a person, decided on timing before any transcript.

        Only for the first words of the call, while the stage is undecided; the
        transcript, when it comes, can still correct the verdict (it is provisional).
        """
        s = self.s
        if self.fsm.stage != "uncertain" or s.speech_start is None or s.last_speech_end is None:
            return []
        voiced = s.last_speech_end - s.speech_start
        if voiced > self.cfg.short_greeting_seconds + 1e-6:
            # a longer greeting: wait for its words ("at most" the limit: a span of
            # exactly the limit, a hair over it in float arithmetic, is short)
            return []
        out = self._predict(
            t,
            0,
            "human",
            0.8,
            f"timing: {voiced:.2f} s greeting then silence",
            ("timing",),
            "",
            max(0.0, t - s.last_speech_end),
        )
        if s.provisional_at is not None:
            s.provisional_from_timing = True
            out.append(ArmTimer("words", s.last_speech_end + self.cfg.transcript_grace))
        return out

    def _maybe_confirm(self, t: float) -> list[Output]:
        """Confirm a provisional person once the window passed and the line is quiet."""
        s = self.s
        if s.provisional_at is None or not s.confirm_due or s.speaking or s.agent_speaking:
            return []
        if any(not x.settled for x in s.turns):
            return []
        grace = self.cfg.transcript_grace
        if s.words_pending_since is not None and t < s.words_pending_since + grace - 1e-9:
            # the callee just spoke: read their words before deciding
            return [ArmTimer("confirm", s.words_pending_since + grace)]
        if s.vm_lean_end is not None and t < s.vm_lean_end + self.cfg.beep_wait_after_lean - 1e-9:
            # the callee's last words leaned voicemail: give its beep time to come
            return [ArmTimer("confirm", s.vm_lean_end + self.cfg.beep_wait_after_lean)]
        if s.provisional_from_timing and not s.turns:
            return self._check_words(t)
        return self._confirm(t, "confirm window passed")

    def _check_words(self, t: float) -> list[Output]:
        """A person decided on timing alone must have said words; a sound without them
        (music, a click, noise) withdraws the verdict."""
        s = self.s
        if s.provisional_at is None or not s.provisional_from_timing or s.turns:
            return []
        s.provisional_at = None
        s.provisional_turn = None
        s.provisional_from_timing = False
        s.confirm_due = False
        s.decided_at = None
        return [
            CancelTimer("confirm"),
            Predicted(
                0,
                "uncertain",
                "uncertain",
                0.5,
                "withdrawn: the short sound had no words",
                ("timing",),
                "",
                t,
                None,
                changed=True,
            ),
        ]

    def _in_breath(self, turn: _Turn) -> bool:
        """Whether ``turn`` went on from the turn before it without a pause for us (the
        same stretch of speech, or one that began under ``long_greeting_silence``
        after it), the agent has not spoken since that turn began, and the stretch is
        not the first words after a hand-over.

        A stretch that begins after the screener put the call through or on hold
        ("Please stay on the line." then "Hi, this is Ben. Sorry, go ahead."), or after
        a ringback, is whoever picked up, however short its pauses.
        """
        if turn.index == 0:
            return False
        before = self.s.turns[turn.index - 1]
        if turn.start is None or before.start is None:
            return False
        spoke = self.s.agent_started_at
        return (
            (turn.start == before.start or turn.follows_on)
            and (spoke is None or spoke < before.start)
            and not self.s.agent_speaking
            and not self._after_hand_over(turn)
        )

    def _after_hand_over(self, turn: _Turn) -> bool:
        """Whether the stretch of speech ``turn`` ends began after a hand-over: the turn
        before the stretch, or a piece of it before ``turn``, puts the call through or
        on hold (:func:`announces_transfer`), or the line rang before the stretch."""
        stretch = self._stretch(turn)
        first = stretch[0].index
        if any(announces_transfer(x.text) for x in stretch[:-1]):
            return True
        if first > 0 and announces_transfer(self.s.turns[first - 1].text):
            return True
        # the context holds one callee entry per turn, in order
        callee = [i for i, (role, _) in enumerate(self.s.context) if role == "callee"]
        return first < len(callee) and rang_before_latest(self.s.context[: callee[first] + 1])

    def _stretch(self, turn: _Turn) -> list[_Turn]:
        """The pieces of the stretch of speech that ends with ``turn``, oldest first:
        ``turn`` and the turns before it that each went on from the one before without a
        pause for us (the same stretch of the recogniser's VAD, or one begun under
        ``long_greeting_silence`` after it; see ``_Turn.follows_on``)."""
        run = [turn]
        while run[0].index > 0:
            x = run[0]
            before = self.s.turns[x.index - 1]
            if x.start is None or before.start is None:
                break
            if not (x.start == before.start or x.follows_on):
                break
            run.insert(0, before)
        return run

    def _conversing(self, turn: _Turn) -> bool:
        """Whether ``turn`` is the second stretch of the callee's speech or later since
        we answered the screener's latest question, none of them with a machine's
        phrase, however weak (a screener's, a mailbox's, a hold phrase).

        A stretch begins after the agent's turn or after a pause of
        ``long_greeting_silence``; pieces of one stretch count once, and brief words
        ("Got it.", which a screener says before it rolls over to a mailbox) not at
        all.
        """
        s = self.s
        asked = max(
            (
                x.index
                for x in s.turns[: turn.index + 1]
                if x.verdict is not None and x.verdict.category == "machine-screening"
            ),
            default=None,
        )
        asked_end = s.turns[asked].end if asked is not None else None
        if asked is None or asked_end is None:
            return False
        answered = next((e for e in s.agent_ends if e > asked_end), None)
        if answered is None or turn.start is None or turn.start < answered:
            return False
        stretches = 0
        for x in s.turns[asked + 1 : turn.index + 1]:
            if x.start is None or x.start < answered:
                continue
            if x.verdict is not None:
                return False
            # "Got it." is what a screener says before it rolls over to a mailbox
            if not (x.follows_on or x.overlapped or _acknowledges(x.text)):
                stretches += 1
        return stretches >= 2

    def _said_since_verdict(self, turn: _Turn) -> str:
        """What the callee said after the provisional person's turn, up to ``turn``."""
        since = self.s.provisional_turn
        start = since + 1 if since is not None else turn.index + 1
        return " ".join(x.text for x in self.s.turns[start : turn.index + 1])

    def _said_before_agent(self, turn: _Turn) -> bool:
        """Whether ``turn``'s speech began before the agent first spoke to the provisional
        person (not before they talked at all)."""
        spoke = self.s.agent_spoke_at
        if spoke is None:
            return not self.s.agent_spoke_since_provisional
        return turn.start is not None and turn.start < spoke

    def _words_pending_after(self, turn: _Turn, t: float) -> float | None:
        """When to look again if speech heard after ``turn`` has not brought its words yet.

        A verdict on ``turn`` would be stale: the words still to come may be the
        machine's ("The subscriber you have dialed ..." then "Please try again
        later"). The recogniser may give no words at all (noise), so the wait ends
        ``transcript_grace`` after that speech.
        """
        pending = self.s.words_pending_since
        if pending is None or turn.end is None or pending <= turn.end + 1e-6:
            return None
        until = pending + self.cfg.transcript_grace
        return until if t + 1e-6 < until else None

    def _screener_announced_tone(self) -> bool:
        """Whether a tone now is the screener's prompt tone, not a voicemail beep.

        The screener named it ("say your name after the tone"), or the last thing said
        is its request for our name and we have not answered: whisper loses "the tone"
        of a garbled prompt ("say your name after Macomb"), and a screener waiting for
        our name does not hand over to a voicemail before we spoke. Anything said after
        the request (a rollover: "... You can leave a message after the tone") makes the
        tone a beep again.
        """
        last = self.s.turns[-1] if self.s.turns else None
        if last is None:
            return False
        words = normalise(last.text).split()
        if "tone" in words or "beep" in words:
            return True
        answered = bool(self.s.context) and self.s.context[-1][0] != "callee"
        v = last.verdict
        return (
            not answered
            and v is not None
            and v.category == "machine-screening"
            and v.strength > HINT_WEIGHT
        )

    def _tone_turn(self) -> int:
        # a tone is newer evidence than every turn heard before it: classifier
        # answers about those turns arriving later are superseded
        return max(len(self.s.turns), self.fsm.latest_turn)

    def _monologue(self, turn: _Turn, *, announced: bool = True) -> float | None:
        """How long the callee has talked, if they talked from the answer up to the end
        of ``turn`` with no pause of ``long_greeting_silence``, for ``monologue_seconds``
        (``welcome_monologue_seconds`` if a business's welcome or where we called
        opened it: :meth:`_too_long`) or more, and no verdict was given yet; otherwise
        None. ``announced=False`` leaves an announcement of where we called out of the
        shorter length."""
        if self.fsm.stage != "uncertain" or self.s.provisional_at is not None:
            return None
        return self._run(
            turn,
            self.cfg.long_greeting_silence,
            over_us=False,
            seconds=self._too_long(turn, announced=announced),
        )

    def _too_long(self, turn: _Turn, *, announced: bool = True) -> float:
        """How long answering the call with speech up to ``turn`` takes to be a
        recording's length: ``welcome_monologue_seconds`` if a business's welcome or
        an announcement of where we called ("You've reached X") opened it, or an offer
        of help had options read on after it (:func:`offers_then_options`),
        ``monologue_seconds`` otherwise."""
        said = " ".join(x.text for x in self.s.turns[: turn.index + 1])
        opening = words(said)
        if opens_with_welcome(opening) or (announced and opens_with_where_we_called(opening)):
            return self.cfg.welcome_monologue_seconds
        if offers_then_options(said):
            # "How can we help you today? ... put one. For ..., play through!": an offer
            # of help with options read on after it is a greeting and its menu
            return self.cfg.welcome_monologue_seconds
        return self.cfg.monologue_seconds

    def _run_over_us(self, turn: _Turn) -> float | None:
        """How long the callee has talked, if a provisional person was decided on an
        earlier turn and every turn since the answer up to ``turn`` was said before
        the agent first spoke or over the agent, with pauses shorter than twice
        ``long_greeting_silence``, for ``monologue_seconds`` or more
        (``welcome_monologue_seconds`` if a business's welcome or where we called
        opened it); otherwise None.

        A person who was given a verdict after their first sentence waits for us or
        answers us; a recording goes on with what it was saying.
        """
        s = self.s
        if s.provisional_at is None or s.provisional_turn is None:
            return None
        if turn.index <= s.provisional_turn or self.fsm.stage != "uncertain":
            # (a person put through after a machine stage: the run from the answer
            # holds the machine's own speech)
            return None
        return self._run(
            turn, 2 * self.cfg.long_greeting_silence, over_us=True, seconds=self._too_long(turn)
        )

    def _run(
        self, turn: _Turn, max_pause: float, *, over_us: bool, seconds: float | None = None
    ) -> float | None:
        """The callee's speech from the answer to the end of ``turn``, if it lasted
        ``seconds`` (``monologue_seconds`` if not given) or more with every pause
        shorter than ``max_pause`` (and, with ``over_us``, every turn after the first
        said before the agent first spoke or over the agent); otherwise None."""
        run = self.s.turns[: turn.index + 1]
        first, end = run[0].start, turn.end
        least = self.cfg.monologue_seconds if seconds is None else seconds
        if first is None or end is None or end - first < least:
            return None
        for before, after in zip(run, run[1:], strict=False):
            if before.end is None or after.start is None:
                return None
            if self._silence_between(before.end, after.start) >= max_pause:
                return None
            if over_us and not (after.overlapped or self._said_before_agent(after)):
                return None
        return end - first

    def _silence_between(self, start: float, end: float) -> float:
        """The longest time from ``start`` to ``end`` in which the VAD heard no speech.

        Speech the recogniser gave no words for (a menu's Spanish, a name it could not
        read) has no turn, but it is no pause: a recording that talks on through it
        has not waited for us.
        """
        longest, at = 0.0, start
        for a, b in self.s.speech_spans:  # in the order heard
            if b <= at or a >= end:
                continue
            longest = max(longest, a - at)
            at = max(at, b)
        return max(longest, end - at)

    def _settle_wait(self, turn: _Turn, confidence: float) -> float:
        words = normalise(turn.text).split()
        if len(words) <= self.cfg.short_greeting_words or confidence >= 0.9:
            return self.cfg.human_silence
        return self.cfg.long_greeting_silence

    def _arm_settle(self) -> list[Output]:
        s = self.s
        pending = [x for x in s.turns if not x.settled]
        first_words = not s.turns and self.fsm.stage == "uncertain"
        if s.speaking or not (pending or first_words) or s.last_speech_end is None:
            return []
        # the earliest useful moment; `classified` re-arms for the long wait
        return [ArmTimer("settle", s.last_speech_end + self.cfg.human_silence)]

    def _settle(self, t: float) -> list[Output]:
        s = self.s
        pending = [x for x in s.turns if not x.settled]
        if not s.speaking and not s.turns and s.provisional_at is None:
            return self._timing_rule(t)
        if s.speaking or not pending:
            return []
        latest = pending[-1]
        wait_words = self._words_pending_after(latest, t)
        if wait_words is not None:
            return [ArmTimer("settle", wait_words)]
        for older in pending[:-1]:
            older.settled = True  # superseded by the latest turn
        out: list[Output] = [
            Classify(
                turn=latest.index,
                stage=self.fsm.stage,
                turns=tuple(self._context_for(latest, pending)[-8:]),
                dtmf=s.dtmf,
            )
        ]
        end = latest.end if latest.end is not None else t
        long_at = end + self.cfg.long_greeting_silence
        if long_at > t + 1e-6:
            out.append(ArmTimer("settle", long_at))
        return out

    def _context_for(self, latest: _Turn, pending: list[_Turn]) -> list[tuple[str, str]]:
        """The call so far as the classifier reads it for ``latest``.

        After a screener or a menu (where a greeting is someone picking up), the pieces
        of ``latest``'s stretch of speech that no verdict was given on are one
        utterance the recogniser's VAD cut up: they are read as one callee turn, so
        that what the first piece showed ("Hi, this is Ben." after the screener's hold)
        is not lost when the next piece ("Sorry, go ahead.") supersedes it. Before any
        stage, the latest piece is read alone: a person's fast verdict rests on how it
        opens ("Sorry about that." then "Hello, who's calling?").
        """
        context = list(self.s.context)
        if self.fsm.stage not in HANDED_OVER_FROM:
            return context
        waiting = {x.index for x in pending}
        pieces: list[_Turn] = []
        for x in reversed(self._stretch(latest)):
            if x.index not in waiting:
                break
            pieces.insert(0, x)
        cut = len(context) - len(pieces)
        if len(pieces) < 2 or context[cut:] != [("callee", x.text) for x in pieces]:
            return context
        return [*context[:cut], ("callee", " ".join(x.text for x in pieces))]

    def _predict_phrase(self, t: float, turn: _Turn) -> list[Output]:
        v = turn.verdict
        assert v is not None
        return self._predict(
            t,
            turn.index,
            v.category,
            v.strength,
            v.reason,
            tuple(f"phrase:{p}" for p in v.phrases),
            turn.text,
            _delay(t, turn.end),
            asks=_asks(turn.text),
        )

    def _predict(
        self,
        t: float,
        turn: int,
        category: AmdCategory,
        confidence: float,
        reason: str,
        evidence: tuple[str, ...],
        transcript: str,
        delay: float | None,
        *,
        asks: bool = False,
    ) -> list[Output]:
        s = self.s
        out: list[Output] = []
        #: a provisional person was withdrawn: the controller must hear of it even when
        #: the stage before the person was the same (a menu put us through to a menu)
        corrected = False
        if s.provisional_at is not None:
            this_turn = s.turns[turn] if 0 <= turn < len(s.turns) else None
            said_over_us = this_turn is not None and (
                this_turn.overlapped or self._said_before_agent(this_turn)
            )
            menu_over_us = category == "machine-ivr" and (
                this_turn is None
                or said_over_us
                # a menu's "we did not receive a valid response" answers us as no
                # person does
                or _rests_on(evidence, IVR_REPROMPTS)
            )
            # a screener's ask for our name or reason, before we spoke or over us: the
            # greeting before it ("Hi.") was the screener's
            screener_over_us = (
                category == "machine-screening"
                and said_over_us
                and _rests_on(evidence, SCREENER_ASKS)
            )
            if (
                category in ("machine-vm", "machine-unavailable")
                or menu_over_us
                or screener_over_us
            ) and confidence >= self.cfg.strong_evidence:
                # a menu corrects it too, unless it answers us (a person reading options)
                # a correction: the "person" was a recording after all
                s.provisional_at = None
                s.provisional_turn = None
                s.provisional_from_timing = False
                s.confirm_due = False
                out += [CancelTimer("confirm"), CancelTimer("words")]
                reason = f"corrects a provisional person: {reason}"
                corrected = True
            else:
                this = s.turns[turn] if 0 <= turn < len(s.turns) else None
                answers_us = (
                    this is not None
                    and s.agent_spoke_since_provisional
                    and not this.overlapped
                    and turn != s.provisional_turn
                    # words of speech that began before we spoke, transcribed late
                    # (the recogniser hands one utterance over in pieces), answer nothing
                    and not self._said_before_agent(this)
                )
                # "Got it." is what a screener says before it hands us to a mailbox,
                # and what a receptionist says before a transfer: it shows nobody yet,
                # so the window starts again from it. Whoever asked: the recogniser
                # loses a screener's question for our name ("Can I get soon coming and
                # read it some out?") as often as its other words
                acknowledged = answers_us and this is not None and _acknowledges(this.text)
                if acknowledged:
                    s.confirm_due = False
                    out.append(ArmTimer("confirm", t + self.cfg.human_confirm_window))
                elif this is not None and _leans_mailbox(category, this):
                    # words that lean to a mailbox or a carrier, too weakly to correct
                    # the person ("I'm sorry, the person you're calling ... leave my
                    # making after the map"), whether they answer us or were said
                    # before we spoke again (a screener's rollover to a mailbox): no
                    # person's answer; the beep that may follow still has its time
                    # (``_maybe_confirm``)
                    s.vm_lean_end = this.end if this.end is not None else t
                elif answers_us and category != "wait":
                    return self._confirm(t, "the callee answered without voicemail evidence")
                # still provisional: a recording talking over us, or a hold
                out.append(
                    Predicted(
                        turn,
                        category,
                        "human",
                        confidence,
                        reason,
                        evidence,
                        transcript,
                        t,
                        delay,
                        provisional=True,
                        asks=asks,
                    )
                )
                return out if acknowledged else [*out, *self._maybe_confirm(t)]
        if s.done:
            return out
        old = self.fsm.stage
        if category == "human" and (
            old == "uncertain"
            # whoever speaks after a menu or a screener put us through may be the
            # mailbox the line rolled over to: their verdict is provisional too
            or (old in _PUT_THROUGH_FROM and confidence >= self.fsm.strong)
        ):
            s.provisional_at = t
            s.provisional_turn = turn
            s.agent_spoke_since_provisional = False
            s.agent_spoke_at = None
            s.decided_at = t
            out.append(
                Predicted(
                    turn,
                    "human",
                    "human",
                    confidence,
                    reason,
                    evidence,
                    transcript,
                    t,
                    delay,
                    provisional=True,
                    changed=True,
                    asks=asks,
                )
            )
            out.append(ArmTimer("confirm", t + self.cfg.human_confirm_window))
            return out
        tr = self.fsm.apply(
            Prediction(max(turn, self.fsm.latest_turn), category, confidence, reason)
        )
        if tr is None:
            return out
        if tr.changed or corrected:
            s.decided_at = t
        out.append(
            Predicted(
                turn,
                category,
                self.fsm.stage,
                confidence,
                reason if tr.accepted else f"{reason} (rejected: {tr.why})",
                evidence,
                transcript,
                t,
                delay,
                changed=tr.changed or corrected,
                asks=asks,
            )
        )
        if self.fsm.final:
            out += self._complete(t, self.fsm.stage, reason)
        return out

    def _confirm(self, t: float, why: str) -> list[Output]:
        s = self.s
        if s.provisional_at is None:
            return []
        decided = s.provisional_at
        turn = s.provisional_turn or 0
        s.provisional_at = None
        s.provisional_turn = None
        s.provisional_from_timing = False
        s.confirm_due = False
        self.fsm.apply(Prediction(max(turn, self.fsm.latest_turn), "human", 1.0, why))
        s.decided_at = decided
        return [CancelTimer("confirm"), *self._complete(t, "human", why)]

    def _complete(self, t: float, category: FinalAmdCategory, reason: str) -> list[Output]:
        s = self.s
        if s.done:
            return []
        s.done = True
        decided = s.decided_at if category != "uncertain" else None
        if category == "uncertain" and self.fsm.stage == "uncertain":
            decided = t
        return [
            CancelTimer("settle"),
            CancelTimer("no_speech"),
            CancelTimer("hard"),
            CancelTimer("confirm"),
            CancelTimer("words"),
            Completed(category, self.fsm.stages[1:] or (), decided, reason),
        ]


#: What a callee's answer to us may lean to without correcting a provisional person:
#: the lean does not confirm the person either.
_LEANS_MAILBOX = frozenset({"machine-vm", "machine-unavailable"})


def _rests_on(evidence: Sequence[str], phrases: Sequence[str] | frozenset[str]) -> bool:
    """Whether a verdict's evidence names one of ``phrases`` (``phrase:<pack phrase>``,
    as :meth:`AmdDetector._predict_phrase` writes it)."""
    return any(e.removeprefix("phrase:") in phrases for e in evidence)


def _leans_mailbox(category: AmdCategory, turn: _Turn) -> bool:
    """Whether an answer leans to a mailbox or a carrier: read so as a whole, or a
    mailbox's or carrier's phrase heard in it as a hint ("... Please leave my making
    after the map" read as a person's words, with "please leave" in them)."""
    hint = turn.verdict
    return category in _LEANS_MAILBOX or (hint is not None and hint.category in _LEANS_MAILBOX)


#: Machine stages a person may take over from (a menu or a screener put us through,
#: or a mailbox's owner picked up): the person's verdict is provisional there too.
_PUT_THROUGH_FROM = frozenset({"machine-ivr", "machine-screening", "machine-vm"})

_CATEGORIES = frozenset(
    {"human", "machine-vm", "machine-ivr", "machine-screening", "machine-unavailable", "wait"}
)


#: Words of a mailbox's greeting that survive a garbled reading.
_MAILBOX_WORDS = frozenset({"message", "messages", "tone", "beep", "mailbox", "voicemail"})
#: Voicemail hints that open a menu's greeting as often as a mailbox's.
_OPENINGS = frozenset({"you have reached"})


def _unkeyed_recording(tokens: list[str]) -> AmdCategory:
    """What a long recording with no key and no phrase read in it most likely is.

    A mailbox's greeting names what it takes (a message, at the tone); anything
    else is taken for a menu: the agent then listens instead of talking, and a beep
    or a mailbox phrase still makes it a voicemail (both are strong evidence).
    """
    return "machine-vm" if _MAILBOX_WORDS.intersection(tokens) else "machine-ivr"


#: What an interim reading alone may show: a menu or a carrier's state, and (when no
#: menu or carrier is read and the final leans to no mailbox) a screener's ask for
#: our name. A mailbox's words read only in an interim are too weak to risk a person
#: on.
_INTERIM_CATEGORIES: frozenset[AmdCategory] = frozenset({"machine-ivr", "machine-unavailable"})


def _read_in_interims(
    readings: Sequence[str], final: str, final_verdict: PhraseVerdict | None
) -> PhraseVerdict | None:
    """The strongest menu or carrier verdict any interim reading holds, else its
    strongest screener's ask for our name (see :data:`_INTERIM_CATEGORIES`), or None.

    ``final_verdict`` is what the phrase gate read in ``final`` (a hint at most, or
    None): a mailbox's lean there keeps a screener's ask out.

    A reading whose words the final says too, in the same order, holds nothing the
    final lacks and is not read again: a person's interims are mostly the start of
    their final, so reading them costs the event loop almost nothing.
    """
    said = f" {normalise(final)} "
    others = (r for r in dict.fromkeys(readings) if f" {normalise(r)} " not in said)
    found = [
        v
        for v in (classify_phrases([reading], window=1) for reading in others)
        if v is not None and v.strength > HINT_WEIGHT
    ]
    strong = [v for v in found if v.category in _INTERIM_CATEGORIES]
    if strong or not found:
        return max(strong, key=lambda v: v.strength, default=None)
    # a screener's ask for our name the final garbled ("Please say your name after the
    # tone" read so by an interim, "Please get your name off to the phone" by the
    # final), when the final leans to no mailbox: its tone is then the screener's
    # prompt tone. Only an ask for a name: a speech menu asks what we are calling
    # about too ("Briefly tell me what you're calling about", its welcome in the piece
    # before), and a screener's stage cannot become a menu's
    asks = [
        v
        for v in found
        if v.category == "machine-screening" and any("name" in p.split() for p in v.phrases)
    ]
    if not asks or (final_verdict is not None and final_verdict.category == "machine-vm"):
        return None
    return max(asks, key=lambda v: v.strength)


#: Words of a short reply that are a person's answer or parting, not a garbled "Got it".
_ANSWERS = frozenset("yes yeah yep no nope hello hi hey bye goodbye speaking".split())


def _acknowledges(text: str) -> bool:
    """Whether ``text`` proves nobody: a bare acknowledgment ("Got it."), or two words
    at most with no question, no person's phrase and no answer or parting ("Okay,
    bye."), what the recogniser made of an acknowledgment ("Got eaten.") as often as
    of anything else."""
    if is_acknowledgment(text):
        return True
    said = words(text)
    return (
        "?" not in text
        and len(said) <= 2
        and not _ANSWERS.intersection(said)
        and not person_markers(text)
    )


def _only_an_opening(said: str) -> bool:
    """Whether the only voicemail evidence in ``said`` is a greeting's opening that
    menus share ("you have reached"), and no mailbox word survived."""
    found = {h.phrase for h in match(said) if h.category == "machine-vm"}
    return found <= _OPENINGS and not _MAILBOX_WORDS.intersection(words(said))


def _delay(t: float, end: float | None) -> float | None:
    return None if end is None else max(0.0, t - end)


def _asks(text: str) -> bool:
    return any(
        h.phrase in ASK_PHRASES or h.category == "machine-vm" or h.phrase.startswith(MENU_CUES)
        for h in match(text)
    )


#: Labels of the structural menu cues (amd/cues.py): a menu asks for keys or words.
MENU_CUES = ("menu ", "language menu")
