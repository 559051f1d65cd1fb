"""Deterministic phrase pre-gate: machine evidence found in callee transcripts.

Pure functions (no asyncio, no I/O). :func:`match` finds known phrases in one
transcript; :func:`classify_phrases` reads the rolling history of recent callee
turns and proposes a category. The gate only reports evidence that a machine
(screener, voicemail, IVR, carrier message) or a hold is on the line: there is
deliberately no "human" pack, so transcript text such as "classify this call as
human" is just words and can never produce human evidence.

Matching works on word sequences of :func:`normalise`-d text and tolerates
speech-recognition damage in a general way:

* the first word of a phrase may match the *end* of the transcript's first word
  (the recording started mid-word: "ave a message" matches "leave a message");
* the last word of a phrase may match the *start* of the transcript's last word
  (the recording was cut: "leave a mess" matches "leave a message");
* in a phrase of two or more words, one word of five or more letters may differ
  by one edit ("leave a massage").

Each imperfection lowers the hit's strength. Phrase packs are plain tuples: a
``STRONG`` tuple of phrases that on their own mean the category, and a ``HINTS``
tuple of phrases that people also say ("not available", "who is calling"), which
count with :data:`HINT_WEIGHT`. In phrases, ``{d}`` stands for one key (a digit,
"pound" or "star") and ``{w}`` for any one word.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.messages import AmdCategory
from amd.cues import carrier_cues, menu_cues, screener_cues
from amd.fsm import Prediction
from amd.menu_shapes import DAMAGED, NUMBER_WORDS, parallel_options
from amd.tolerance import FUNCTION_WORDS, split_glued, word_quality

__all__ = [
    "HINT_WEIGHT",
    "IVR_REPROMPTS",
    "SCREENER_ASKS",
    "PACKS",
    "PhraseHit",
    "PhraseVerdict",
    "classify_phrases",
    "is_acknowledgment",
    "match",
    "normalise",
]

#: How a greeting's promise (:data:`PROMISES`) names the message it asks for, as said
#: or as the recogniser swaps it: a person who got a message of ours says "your
#: message" or "the message" ("I got your message and I'll call you back").
_A_MESSAGE = frozenset({"a", "my"})

#: Weight of a hint phrase: evidence, but not enough to correct a machine stage.
HINT_WEIGHT = 0.6
_TRUNCATED = 0.9
_ONE_EDIT = 0.85

SCREENING_STRONG: tuple[str, ...] = (
    "call assist",
    "by google",
    "automatically screening",
    "record your name",
    "reason for calling",
    "asking for more information",
    "if this person is available",
    "state your name",
    "say your name",
    "why you are calling",
    "this call is being screened",
    "screening service",
    "google assistant",
    "the person you are calling is using",
    "call assistant",
    "calling assistant",
    "automated assistant",
    "virtual assistant",
    "digital assistant",
    "tell me your name",
    "before i connect you",
    "before i try to connect you",
    "before i put you through",
    "see if they are available",
    "if they are available",
    "screening this call",
    "screening calls",
    "answering for the person",
    "assistant for the person",
    "reason for your call",
    "reason for the call",
    "who you are and why",
    "what you are calling about",
    "call screen",
    "get a copy of this conversation",
)
SCREENING_HINTS: tuple[str, ...] = ("who is calling", "what is this regarding")

#: A greeting's promise after what it asks for, strong on its own: whisper tiny.en
#: loses the verb first ("so name a message and I'll get back", "sorry my message and
#: I'll get back to" for "so leave a message and I'll get back to you", in three
#: female espeak-ng voices). Only after "a" or "my" (:data:`_A_MESSAGE`).
PROMISES: tuple[str, ...] = (
    "a message and i will get back",
    "a message and we will get back",
    "a message and i will call you back",
    "a message and we will call you back",
)

VOICEMAIL_STRONG: tuple[str, ...] = (
    "leave a message",
    "leave me a message",
    "leave an additional message",
    "leave your message",
    "leave a voicemail",
    "leave your name and number",
    "record your message",
    "after the tone",
    "after the beep",
    "at the tone",
    "at the beep",
    "forwarded to voicemail",
    "reached the voicemail",
    "voicemail box",
    "cannot take your call",
    "unable to take your call",
    "when you have finished recording",
    "leave your name",
    "leave a brief message",
    "leave a detailed message",
    "not available to take your call",
    "cannot answer your call",
    "unable to answer",
    "record a message",
    "return your call",
    *PROMISES,
)
VOICEMAIL_HINTS: tuple[str, ...] = (
    # on its own a hint: what follows says whether a message is wanted, and the
    # recogniser has put it in a person's mouth ("Please leave me a comment")
    "please leave",
    "not available",
    "is unavailable",
    "cannot take the call",
    "can't come to the phone",
    "get back to you",
    "mailbox",
    "voicemail",
    "you have reached",
    "not here right now",
    "not around right now",
    "away from the phone",
    "call you back",
    "missed your call",
)

UNAVAILABLE_STRONG: tuple[str, ...] = (
    "mailbox is full",
    "mailbox has not been set up",
    "has not been set up",
    "not in service",
    "no longer in service",
    "has been disconnected",
    "cannot be completed as dialed",
    "try your call again later",
    "check the number and dial again",
    "is not accepting calls",
    "has not set up",
    "not set up their voicemail",
    "not been set up",
    "is not set up",
    "voicemail box is full",
    "not a working number",
    "temporarily out of service",
    "cannot be reached",
    "is not reachable",
    "has been switched off",
    "your call cannot be completed",
    "cannot be completed at this time",
    "all circuits are busy",
    "cannot accept messages",
    "cannot accept any messages",
    # the carrier's own frame: it survives when the recogniser loses the noun ("is
    # full and cannot accept any medicine")
    "full and cannot accept",
    "not accepting messages",
    "could not be completed",
    "call cannot be completed",
    "not be completed as dialed",
    "check the number and try again",
    "number and try again",
    "up and try again",
    "not a valid number",
    "is no longer valid",
    "been temporarily disconnected",
    "outside the coverage area",
    "out of the coverage area",
    "has been changed",
    # the mailbox's state lost ("the mailbox info and cannot accept new message")
    "accept new messages",
    "cannot accept new message",
)
# Carrier voicemail often opens "the number you have dialed is not available,
# please leave a message": on its own this opener must not end the call.
UNAVAILABLE_HINTS: tuple[str, ...] = (
    "the number you have dialed",
    "try again later",
    # a carrier's closing with the rest lost ("Please enter and try again." for
    # "Please hang up and try again.", "Please try again, Rader." for "... later"):
    # nobody answering a call asks the caller to try again before the caller spoke
    "please try again",
    "and try again",
    # whose state the recogniser often loses ("The mobile phone you are calling in
    # which" for "... is switched off"): nobody says it of a phone they answer
    "mobile phone you are calling",
)

#: A screener's asks that nobody answering a call says before we spoke or over us
#: ("Before I try to connect you, please state your name and the reason for your
#: call."): they correct a person's verdict given on the greeting before them
#: (:class:`amd.detector.AmdDetector`). Not among them: what a person who picked up
#: asks too ("what are you calling about", "who is calling", "tell me your name").
SCREENER_ASKS: frozenset[str] = frozenset(
    {
        "state your name",
        "say your name",
        "record your name",
        "reason for calling",
        "reason for your call",
        "before i connect you",
        "before i try to connect you",
        "before i put you through",
        "if this person is available",
        "see if they are available",
        "if they are available",
        "call assist",
        "call assistant",
        "calling assistant",
        "automated assistant",
        "virtual assistant",
        "digital assistant",
        "by google",
        "google assistant",
        "screening service",
        "automatically screening",
        "this call is being screened",
        "screening this call",
        "the person you are calling is using",
    }
)
#: What a menu says when it got no usable key or word, before it asks again or
#: hangs up ("We did not receive a valid response. Goodbye."): nobody answering a
#: call says it, so it corrects a person's verdict even said after we spoke
#: (:class:`amd.detector.AmdDetector`). Whisper tiny.en keeps its frame and loses a
#: word ("We did not receive a marriage response", "We could not receive a mallet
#: response", female and male espeak-ng voices).
IVR_REPROMPTS: tuple[str, ...] = (
    # "did not", "could not", "have not": whoever did not receive it
    "not receive a {w} response",
    "not receive a response",
    "not receive your response",
    "not receive your selection",
    "not receive a {w} selection",
    "not receive any input",
    "not a valid selection",
    "not a valid option",
    "not a valid entry",
    "not a valid response",
    "not a valid choice",
    "invalid selection",
    "invalid entry",
    "invalid option",
    "invalid response",
    "please make a selection",
    "please make your selection",
)

IVR_STRONG: tuple[str, ...] = (
    *IVR_REPROMPTS,
    "press {d} for",
    "press {d} to",
    "or press {d}",
    "for {w} press",
    "for {w} {w} press",
    "press the pound key",
    "press pound",
    "say or press",
    "main menu",
    "to speak to a representative",
    "to speak with a representative",
    "please listen carefully as our menu options have changed",
    "menu options have changed",
    "dial the extension",
    "know your party's extension",
    "your party's extension",
    "enter the extension",
    "you can say things like",
    # "Please choose from the following options" ("... tune from the following option")
    "the following options",
    "say the name of the department",
    "say the name of the person",
    "in a few words",
    "for more options",
    "para espanol",
    "oprima",
    "enter your account number",
    "using your telephone keypad",
    "using your keypad",
    # "Please listen carefully" as whisper tiny.en splits "listen" in six of 13 voices
    # ("Please leave them carefully, I will mention options and change")
    "please listen carefully",
    "please leave them carefully",
    # "In a few words, tell me why you're calling" with "in" lost: a speech menu, not
    # a screener, asks for a few words
    "few words tell me why",
)
IVR_HINTS: tuple[str, ...] = ()

WAIT_STRONG: tuple[str, ...] = (
    "please hold",
    "one moment",
    "hold on",
    "your call is important to us",
    "please stay on the line",
    "please stay in the line",
    "please continue to hold",
    "all of our representatives are",
    "while we connect you",
)
WAIT_HINTS: tuple[str, ...] = ()

#: Every pack: category -> (strong phrases, hint phrases).
PACKS: dict[AmdCategory, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "machine-unavailable": (UNAVAILABLE_STRONG, UNAVAILABLE_HINTS),
    "machine-vm": (VOICEMAIL_STRONG, VOICEMAIL_HINTS),
    "machine-ivr": (IVR_STRONG, IVR_HINTS),
    "machine-screening": (SCREENING_STRONG, SCREENING_HINTS),
    "wait": (WAIT_STRONG, WAIT_HINTS),
}

_CONTRACTIONS: tuple[tuple[str, str], ...] = (
    # "You've reached" with its "'ve" lost, opening a sentence ("You reach the billing
    # department"; not "can you reach him", nor "you reached out to us")
    (r"(^|[.!?]\s*)you reach(?:ed)?\b(?! out\b)", r"\1you have reached"),
    (r"\bcan't\b", "cannot"),
    (r"\bwon't\b", "will not"),
    (r"\bain't\b", "is not"),
    (r"\blet's\b", "let us"),
    (r"n't\b", " not"),
    (r"'ve\b", " have"),
    (r"'re\b", " are"),
    (r"'ll\b", " will"),
    (r"\bi'm\b", "i am"),
    (r"'d\b", " would"),
    (r"\b(it|that|what|there|here|he|she|who|where|how)'s\b", r"\1 is"),
)
# Speech recognisers often drop the apostrophe; only unambiguous forms here.
_BARE_CONTRACTIONS = {
    "cant": "cannot",
    "dont": "do not",
    "doesnt": "does not",
    "didnt": "did not",
    "isnt": "is not",
    "arent": "are not",
    "wasnt": "was not",
    "couldnt": "could not",
    "wouldnt": "would not",
    "havent": "have not",
    "hasnt": "has not",
    "im": "i am",
    "ive": "i have",
    "youve": "you have",
    "youre": "you are",
    "theyre": "they are",
    "thats": "that is",
    "whats": "what is",
}
_COMPOUNDS = {("voice", "mail"): "voicemail", ("mail", "box"): "mailbox"}
_KEYS = {"pound", "star"}
_DIGIT, _WORD = "{d}", "{w}"


#: Recognisers write a spoken key as its homophone ("press to, for billing"):
#: after "press"/"dial" and before a pause, those words are the key.
_MISHEARD_KEY = re.compile(
    r"\b(press|dial|push)\s+(to|too|for|won|tree|free|ate)\b(?=\s*(?:[,.;!?]|$))"
)
_MISHEARD = {"to": "2", "too": "2", "for": "4", "won": "1", "tree": "3", "free": "3", "ate": "8"}


def misheard_keys(text: str) -> str:
    """Rewrites "press to," as "press 2," (and the other key homophones), in lower case."""
    return _MISHEARD_KEY.sub(lambda m: f"{m.group(1)} {_MISHEARD[m.group(2)]}", text.lower())


#: Words of a bare acknowledgment ("Got it.", "Okay, one moment please.", "Thank you,
#: please hold."): said by a person and by a screener alike, so they show neither.
ACKNOWLEDGMENT_WORDS: frozenset[str] = frozenset(
    "got it okay ok alright all right thanks thank you sure great perfect noted "
    "understood one 1 moment please hold on just a second sec minute mhm hmm uh huh "
    "i see cool and so".split()
)


def is_acknowledgment(text: str) -> bool:
    """Whether ``text`` is a bare acknowledgment and nothing more.

    At most six words, all of :data:`ACKNOWLEDGMENT_WORDS` but one, and that one
    only after two that are ("Got it, Ethan.": a name, or a garbled first word of
    what came next). A question, an answer ("Yes, speaking.") or anything longer is
    not one.
    """
    if "?" in text:
        return False
    words = normalise(text).split()
    if not words or len(words) > 6:
        return False
    others = [w for w in words if w not in ACKNOWLEDGMENT_WORDS]
    return not others or (len(others) == 1 and len(words) - 1 >= 2 and words[-1] == others[0])


def normalise(text: str) -> str:
    """Normalises a transcript (or a phrase) for matching.

    Lower-cases, expands contractions ("can't" -> "cannot", "you've" -> "you
    have"), spells ``#``/``*`` as "pound"/"star", turns number words into
    digits ("press one" -> "press 1"), joins "voice mail"/"mail box", strips
    punctuation and collapses whitespace.

    Args:
        text: Any text.

    Returns:
        Space-separated lower-case words.
    """
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    # "español" -> "espanol": accents off, so other languages' words match
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = text.replace("#", " pound ").replace("*", " star ").replace("&", " and ")
    text = misheard_keys(text)
    for pattern, repl in _CONTRACTIONS:
        text = re.sub(pattern, repl, text)
    text = re.sub(r"[^a-z0-9\s]", " ", text.replace("'", ""))
    words: list[str] = []
    for raw in text.split():
        for word in _BARE_CONTRACTIONS.get(raw, raw).split():
            word = NUMBER_WORDS.get(word, word)
            if words and (words[-1], word) in _COMPOUNDS:
                words[-1] = _COMPOUNDS[(words[-1], word)]
            else:
                words.append(word)
    return " ".join(words)


def _compile(phrase: str) -> tuple[str, ...]:
    # Placeholders survive normalise as letters-only sentinels.
    text = phrase.replace(_DIGIT, " zzdigitzz ").replace(_WORD, " zzwordzz ")
    words = normalise(text).split()
    return tuple({"zzdigitzz": _DIGIT, "zzwordzz": _WORD}.get(w, w) for w in words)


#: Each pack phrase as (category, phrase, words, weight, first words it may start
#: at, or None for any).
_COMPILED: tuple[tuple[AmdCategory, str, tuple[str, ...], float, frozenset[str] | None], ...] = (
    tuple(
        (category, phrase, _compile(phrase), weight, _A_MESSAGE if phrase in PROMISES else None)
        for category, (strong, hints) in PACKS.items()
        for phrases, weight in ((strong, 1.0), (hints, HINT_WEIGHT))
        for phrase in phrases
    )
)


@dataclass(frozen=True)
class PhraseHit:
    """One phrase found in a transcript.

    Attributes:
        category: The category the phrase is evidence for.
        phrase: The phrase as written in its pack.
        start_word: Index of the first matched word in the normalised text
            (in :func:`classify_phrases`, in the joined history).
        strength: 1.0 for an exact strong phrase; lower for hints, truncated
            or misheard words.
    """

    category: AmdCategory
    phrase: str
    start_word: int
    strength: float


def _one_edit(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    # Substitution when equal length, otherwise insertion into the shorter word.
    return a[i + 1 :] == b[i + 1 :] if len(a) == len(b) else a[i:] == b[i + 1 :]


def _word_score(
    token: str, word: str, *, first: bool, last: bool, multi: bool, edits_left: bool
) -> tuple[float, bool]:
    """Scores one transcript token against one phrase word: (quality, used an edit)."""
    if word == _DIGIT:
        return (1.0 if token.isdigit() or token in _KEYS else 0.0), False
    if word == _WORD or token == word:
        return 1.0, False
    if multi and first and 2 <= len(token) < len(word) and word.endswith(token):
        return _TRUNCATED, False
    if multi and last and 3 <= len(token) < len(word) and word.startswith(token):
        return _TRUNCATED, False
    if multi and edits_left and min(len(token), len(word)) >= 5 and _one_edit(token, word):
        return _ONE_EDIT, True
    if multi and word in FUNCTION_WORDS and token in FUNCTION_WORDS:
        return word_quality(token, word), False  # "leave my message": free, but weaker
    if multi and edits_left:
        quality = word_quality(token, word)
        if quality:
            return quality, True
    return 0.0, False


def _names_another(tokens: Sequence[str], start: int, words: tuple[str, ...]) -> bool:
    """Whether the phrase's closing "your <noun>" was heard as "the <noun> of ...": the
    noun is then someone else's ("Please say the name of the person you would like to
    reach" is a directory's prompt, not a screener's "say your name")."""
    after = start + len(words)
    return (
        len(words) >= 2
        and words[-2] == "your"
        and tokens[after - 2] != "your"
        and after < len(tokens)
        and tokens[after] == "of"
    )


def _match_at(tokens: Sequence[str], start: int, words: tuple[str, ...]) -> float:
    multi = len(words) > 1
    strength, edits_left, exact = 1.0, True, 0
    for j, word in enumerate(words):
        pos = start + j
        quality, used_edit = _word_score(
            tokens[pos],
            word,
            first=j == 0 and pos == 0,
            last=j == len(words) - 1 and pos == len(tokens) - 1,
            multi=multi,
            edits_left=edits_left,
        )
        if quality == 0.0:
            return 0.0
        edits_left = edits_left and not used_edit
        exact += quality == 1.0 and word not in (_DIGIT, _WORD)
        strength *= quality
    if _names_another(tokens, start, words):
        return 0.0
    return strength if exact else 0.0


def _match_tokens(tokens: Sequence[str], offset: int = 0) -> list[PhraseHit]:
    found: list[tuple[PhraseHit, int, bool]] = []  # (hit, words covered, exact)
    for category, phrase, words, weight, openers in _COMPILED:
        for start in range(len(tokens) - len(words) + 1):
            if openers is not None and tokens[start] not in openers:
                continue
            strength = _match_at(tokens, start, words)
            if strength:
                hit = PhraseHit(category, phrase, offset + start, round(strength * weight, 3))
                found.append((hit, len(words), strength == 1.0))
    # the words as said win over a damaged reading of them ("cannot take the call"
    # is a hint; it must not also be "cannot take your call" with one word swapped),
    # and a damaged reading adds nothing where the same category matched as said
    exact_spans = {(h.start_word, n) for h, n, ok in found if ok}
    exact_places = {(h.category, h.start_word) for h, n, ok in found if ok}
    hits = [h for h, _, ok in found if ok]
    fuzzy: dict[tuple[str, int], PhraseHit] = {}
    for h, n, ok in found:
        key = (h.category, h.start_word)
        if ok or (h.start_word, n) in exact_spans or key in exact_places:
            continue
        if key not in fuzzy or h.strength > fuzzy[key].strength:
            fuzzy[key] = h
    hits += fuzzy.values()
    for cue_category, label, start, strength in (
        *menu_cues(tokens),
        *carrier_cues(tokens),
        *screener_cues(tokens),
    ):
        hits.append(PhraseHit(cue_category, label, offset + start, strength))  # type: ignore[arg-type]
    hits.sort(key=lambda h: (h.start_word, -h.strength, h.phrase))
    return hits


def words(text: str) -> list[str]:
    """The words phrases are matched against: :func:`normalise`, keys unglued ("pref1")."""
    return split_glued(normalise(text).split())


def match(text: str) -> list[PhraseHit]:
    """Finds every pack phrase in one transcript.

    Args:
        text: One callee turn's transcript (untrusted; never interpreted).

    Returns:
        The hits in transcript order (possibly several, possibly overlapping).
    """
    return _match_text(text, words(text))


def _match_text(text: str, tokens: Sequence[str], offset: int = 0) -> list[PhraseHit]:
    """:func:`_match_tokens` over ``tokens`` (``text``'s words), and the cues that
    need ``text``'s sentences."""
    hits = _match_tokens(tokens, offset)
    if not any(h.category == "machine-ivr" and h.strength >= DAMAGED for h in hits):
        # the options' frame is in the sentences, which the words no longer have
        for category, label, start, strength in parallel_options(text):
            hits.append(PhraseHit(category, label, offset + start, strength))  # type: ignore[arg-type]
        hits.sort(key=lambda h: (h.start_word, -h.strength, h.phrase))
    return hits


@dataclass(frozen=True)
class PhraseVerdict:
    """What the pre-gate concludes from the recent callee turns.

    Attributes:
        category: The proposed category (never ``human`` or ``uncertain``).
        strength: Confidence in it, from 0.0 to 1.0.
        phrases: The phrases the decision rests on, in transcript order.
    """

    category: AmdCategory
    strength: float
    phrases: tuple[str, ...]

    @property
    def reason(self) -> str:
        """A short reason string such as ``"phrases: leave a message"``."""
        return "phrases: " + "; ".join(self.phrases)

    def to_prediction(self, turn: int) -> Prediction:
        """Turns the verdict into a stage-machine prediction for ``turn``."""
        return Prediction(turn, self.category, self.strength, self.reason)


#: Voicemail phrases that only say when to speak; after a screener's ask
#: ("say your name after the tone") they belong to the screener.
TONE_ONLY: frozenset[str] = frozenset(
    {"after the tone", "after the beep", "at the tone", "at the beep"}
)


#: Voicemail phrases that name the mailbox without offering to take a message
#: ("has not set up their voicemail box").
NAMES_THE_MAILBOX: frozenset[str] = frozenset({"voicemail box", "reached the voicemail"})

#: Carrier hints that send the caller away: said with a mailbox that is only named,
#: they mean no message can be left ("... has not set up their voicemail box yet.
#: Please try again later."); a greeting that takes messages asks for one.
SENDS_AWAY: frozenset[str] = frozenset({"try again later"})

#: Labels of carrier-intercept cues (amd/cues.py) start with this.
CARRIER_CUE = "carrier:"


def _places(hits: Sequence[PhraseHit]) -> int:
    """How many separate places in the text the hits come from (overlapping hits count once)."""
    starts = sorted(h.start_word for h in hits)
    return sum(1 for i, w in enumerate(starts) if i == 0 or w - starts[i - 1] > 3)


def _decide(hits: Sequence[PhraseHit]) -> tuple[AmdCategory, list[PhraseHit]] | None:
    by_cat: dict[AmdCategory, list[PhraseHit]] = {}
    for hit in hits:
        by_cat.setdefault(hit.category, []).append(hit)
    screening = by_cat.get("machine-screening", [])
    vm = by_cat.get("machine-vm", [])
    ivr = by_cat.get("machine-ivr", [])
    unavailable = by_cat.get("machine-unavailable", [])
    takes_message = [h for h in vm if h.phrase not in NAMES_THE_MAILBOX]
    if takes_message and all(h.phrase.startswith(CARRIER_CUE) for h in unavailable):
        # carrier voicemail opens like an intercept, then offers to take a message
        unavailable = []
    if unavailable:
        return "machine-unavailable", unavailable
    if screening and vm:
        first_screen = min(h.start_word for h in screening)
        takeover = [h for h in vm if h.start_word > first_screen and h.phrase not in TONE_ONLY]
        if takeover:
            return "machine-vm", takeover
    if ivr and len(vm) >= 2 and _places(ivr) == 1:
        # a voicemail greeting that mentions one key ("press pound for more options")
        return "machine-vm", vm
    for category in ("machine-ivr", "machine-screening", "machine-vm", "wait"):
        if category in by_cat:
            return category, by_cat[category]
    return None


def classify_phrases(history: Sequence[str], *, window: int = 4) -> PhraseVerdict | None:
    """Proposes a category from the recent callee turns, or None without evidence.

    The last ``window`` turns are matched one by one (so truncation is tolerated
    at each turn's edges) and their hits joined in order, which catches a
    screener whose hand-over to voicemail is spread over several short turns.

    Precedence, first match wins:

    1. ``machine-unavailable``: a carrier says the call cannot go through.
    2. ``machine-vm`` when a voicemail phrase follows screening evidence: the
       screener has handed over to message-taking.
    3. ``machine-ivr``: a keypad or spoken menu.
    4. ``machine-screening``: someone (or something) asks for name or reason.
    5. ``machine-vm``: a plain voicemail greeting.
    6. ``wait``: a hold.

    A voicemail verdict whose phrases only name the mailbox ("voicemail box"),
    said with a hint that sends the caller away ("try again later"), is
    ``machine-unavailable``: no message can be left.

    The order is applied first to strong phrases only, then, if none matched,
    to hints as well; so a hint ("the number you have dialed") never outranks a
    strong phrase of a lower category ("leave a message"), and a hint-only
    verdict has strength at most :data:`HINT_WEIGHT`.

    Args:
        history: Callee transcripts, oldest first.
        window: How many of the most recent turns to read.

    Returns:
        The verdict, or None when no phrase matched.
    """
    hits: list[PhraseHit] = []
    offset = 0
    for turn in list(history)[-window:] if window > 0 else []:
        tokens = words(turn)
        hits.extend(_match_text(turn, tokens, offset))
        offset += len(tokens)
    decided = _decide([h for h in hits if h.strength > HINT_WEIGHT]) or _decide(hits)
    if decided is None:
        return None
    category, used = decided
    sent_away = [h for h in hits if h.phrase in SENDS_AWAY]
    if category == "machine-vm" and sent_away and all(h.phrase in NAMES_THE_MAILBOX for h in used):
        # the mailbox is named, no message is asked for, and the caller is sent away:
        # the carrier saying that no message can be left; the mailbox's words carry
        # the strength the hint alone lacks
        category, used = "machine-unavailable", [*used, *sent_away]
    return PhraseVerdict(
        category=category,
        strength=max(h.strength for h in used),
        phrases=tuple(dict.fromkeys(h.phrase for h in used)),
    )
