"""Menu and carrier cues by shape, and the recogniser tolerance they rely on."""

from __future__ import annotations

import pytest

from amd.classifier import score_turn
from amd.cues import opens_with_welcome, opens_with_where_we_called
from amd.phrases import classify_phrases, match, words
from amd.tolerance import split_glued, word_quality


def _verdict(*turns: str) -> str | None:
    v = classify_phrases(list(turns))
    return None if v is None or v.strength < 0.85 else v.category


@pytest.mark.parametrize(
    "text",
    [
        # a business greeting, then the menu: the menu decides
        "Thank you for calling Miller's Hardware. Our hours are eight to six. "
        "To check on an order, press one.",
        "Hi, thanks for calling Cobalt Bank. How can we help you today? For credit cards, press 2.",
        # keys without "press"
        "For appointments, dial 1. For refills, dial 2.",
        "If you are a new patient, select option one.",
        "One for delivery. Two for carry out.",
        # spoken and data-entry prompts
        "You can say things like book a flight or baggage.",
        "Which department would you like? Just say sales, service, or parts.",
        "Please enter your account number, followed by the pound sign.",
        "Welcome to Metro Wireless. To get started, please say your account number.",
        # directories
        "To reach someone by name, enter the first three letters of their last name now.",
        "If you know your party's extension, you may dial it at any time.",
        # language selection, with no English key at all
        "Para español, marque el dos. For English, please stay on the line.",
        "To continue in English, say English. Para continuar en español, diga español.",
    ],
)
def test_menus_in_many_shapes_are_menus(text: str) -> None:
    assert _verdict(text) == "machine-ivr"


@pytest.mark.parametrize(
    "text",
    [
        "The subscriber you have dialed is not available at the moment. Please try again later.",
        "We're sorry, your call could not be completed as dialed.",
        "The mobile phone you are calling is switched off or outside the coverage area.",
        "This number has been temporarily disconnected at the customer's request.",
        "The customer you are calling cannot be reached at this time.",
        "Calls to this number are currently restricted. Please try your call again later.",
    ],
)
def test_carrier_intercepts_in_other_wordings(text: str) -> None:
    assert _verdict(text) == "machine-unavailable"


def test_carrier_voicemail_that_takes_a_message_stays_voicemail() -> None:
    text = "The number you have dialed is not available. At the tone, please record your message."
    assert _verdict(text) == "machine-vm"
    # naming the mailbox is not taking a message
    text = "The subscriber you have dialed has not set up their voicemail box. Try again later."
    assert _verdict(text) == "machine-unavailable"


@pytest.mark.parametrize(
    "text",
    [
        "Please say your name after the tone.",  # a screener, not a spoken menu
        "Please state your name and the reason for your call.",
    ],
)
def test_screeners_are_not_menus(text: str) -> None:
    assert _verdict(text) == "machine-screening"


@pytest.mark.parametrize(
    "text",
    [
        "Thanks for calling Oakridge Pharmacy, this is Devon.",
        "Front desk, this is Carla.",
        "Sorry, which extension did you need? I can transfer you.",
        "Sorry, can you say your phone number again?",
        "Hello, Nguyen residence.",
        "I'll be there at one for lunch.",
        "She's not available, try again later.",
        # an apology that names no line, or a line without "has been"
        "I'm sorry, who is this?",
        "Sorry, this is my work number.",
        "Sorry, my number has been ringing all day, who is this?",
        # a message of ours the person got: their promise is no greeting's
        "Yes, I got your message and I'll call you back.",
        "I saw the message and we will get back to you.",
    ],
)
def test_people_give_no_strong_machine_evidence(text: str) -> None:
    assert _verdict(text) is None


@pytest.mark.parametrize(
    ("heard", "opens"),
    [
        ("You've reached Cedar Valley Clinic.", True),
        ("Hi, you have reached the Nguyen residence.", True),
        # as whisper tiny.en kept it in espeak-ng voices
        ("You have reached here no more, it's related.", True),
        ("You'll reach like your mortars, which determines what you like.", True),
        ("You can reach senior melee clinic.", True),
        # a person's words, or the words anywhere but at the opening
        ("Hello? Oh, you reached me at a bad time.", False),
        ("Hello, this is Dana, you can reach me here any time.", False),
        ("Yes?", False),
    ],
)
def test_where_we_called_opens_the_words(heard: str, opens: bool) -> None:
    assert opens_with_where_we_called(words(heard)) is opens


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # Whisper on espeak-ng voices (bench/amd.py --voices): fricatives swap,
        # keys glue to their verb, onsets are lost, function words swap
        ("Preth one for billing, preth two for sales.", "machine-ivr"),
        ("For English, Pref1. For Spanish, Pref2.", "machine-ivr"),
        # "stay" lost, the selection still said: "on the line"
        ("Finally, I'm your market boss. For English, please pay on the line.", "machine-ivr"),
        ("I'm in English class, I'm on the line with my teacher.", None),
        # a welcome, then what to say, its words lost
        (
            "Welcome to Metro Wireless, to get started. Please say, I'm going to be in the "
            "second number.",
            "machine-ivr",
        ),
        ("Thanks for calling. Please say your name after the tone.", "machine-screening"),
        # the welcome lost, its first prompt kept
        ("Will come to me to write a list. To get started. Please say, Oren.", "machine-ivr"),
        ("Thanks for calling Joe's, sorry, please say that again?", None),
        ("Please pay your name and why you are calling.", "machine-screening"),
        ("And you, clean fold while I try to connect you. Please fold.", "wait"),
        ("Hi, you reached Alex. Please leave my message after the phone.", "machine-vm"),
    ],
)
def test_common_recogniser_damage_is_tolerated(heard: str, category: str) -> None:
    assert _verdict(heard) == category


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # "I'm sorry, this number has been temporarily disconnected at the customer's
        # request" in two female espeak-ng voices: the state lost, the frame kept
        (
            "I'm sorry, this number has been since we really can't see that in the cost "
            "of every quest.",
            "machine-unavailable",
        ),
        ("I am sorry, this number has been confirmed.", "machine-unavailable"),
        ("We're sorry, the number has been a little bit.", "machine-unavailable"),
        # "so leave a message and I'll get back to you", its verb lost
        (
            "I'm using Tom, I'm not gonna write out, so name a message and I'll get back, so...",
            "machine-vm",
        ),
        (
            "Hi, this is Tom, I'm not alone right now, sorry my message and I'll get back to...",
            "machine-vm",
        ),
        ("Hey, it's Chris, so leaf me a message and we'll call you back.", "machine-vm"),
    ],
)
def test_a_frame_whose_key_word_was_lost_still_counts(heard: str, category: str) -> None:
    assert _verdict(heard) == category


def test_word_quality_rules() -> None:
    assert word_quality("press", "press") == 1.0
    assert word_quality("preth", "press") > 0.85  # sound-alike
    assert word_quality("fold", "hold") >= 0.85  # onset
    assert word_quality("my", "a") > 0.85  # function words
    assert word_quality("pass", "press") == 0.0
    assert word_quality("1", "one") == 0.0
    assert split_glued(["pref1", "for", "b2b"]) == ["pref", "1", "for", "b2b"]


def test_a_damaged_reading_adds_nothing_where_the_words_match_as_said() -> None:
    # "cannot take the call" is a hint; it is not also "cannot take your call"
    v = classify_phrases(["They can't take the call."])
    assert v is not None and v.strength < 0.85
    assert [h.phrase for h in match("OK so now leave a message")] == ["leave a message"]


@pytest.mark.parametrize(
    "text",
    [
        # whisper tiny.en kept one language of a two-language menu (Piper voice, 8 kHz)
        "Thank you for calling Pacific Help. to continue in English.",
        "Pair a Danielle, Mark L. Doth, for English. Please stay on the line.",
        # "on" lost as well (espeak-ng en-gb)
        "Parry pan, your market loss. For English, please pay the line.",
        "For Spanish, press 2.",
        # the key verb misheard as any word, its key kept (espeak-ng en-us-nyc)
        "Welcome to First Coast Man. For English, class 1!",
        # or glued to its key, the preposition lost (espeak-ng en-gb-scotland)
        "We'll come to the first course, man. Foreign English, prezuan, paraspan, yol.",
        # a service in a language opening the words, the rest lost (espeak-ng en-gb)
        "For term is in English.",
        "For assistance in Spanish, um.",
        # a business welcome, then the screener-like ask of a speech menu
        "Welcome to SkyCable, and a few words tell me why you're calling today.",
        "Thanks for calling Northwind Travel. Briefly tell me what you need.",
    ],
)
def test_what_the_recogniser_keeps_of_language_and_speech_menus_is_a_menu(text: str) -> None:
    assert _verdict(text) == "machine-ivr"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("I am calling for English class, please hold.", "wait"),
        # a person's number after a language is not a key (two digits, or no word between)
        ("I'm calling for English class 12, please hold.", "wait"),
        ("Yeah, for English 1 we use the blue book.", None),
        ("My English professor is here, hold on.", "wait"),
        ("Hello? Yes, I speak English, please hold on.", "wait"),
        ("Please state your name and tell me why you are calling.", "machine-screening"),
        ("Thanks for calling Oakridge Pharmacy, this is Devon.", None),
        # asked of us, or not at the start of the words
        ("For me in English, please?", None),
        ("Can you say that for me in English?", None),
        ("Yeah, for the record in English class we did that.", None),
    ],
)
def test_a_language_or_a_welcome_alone_is_no_menu(text: str, category: str | None) -> None:
    assert _verdict(text) == category


@pytest.mark.parametrize(
    ("heard", "welcome"),
    [
        ("Welcome to First Coast Bank.", True),
        ("Good morning and welcome to Harbor Dental.", True),
        # "welcome to" split by the recogniser (espeak-ng en-029, whisper tiny.en)
        ("Will come to first course hang.", True),
        ("We'll come to the next hand, Lord, to reach someone's name.", True),
        ("Well, come to Metro Wireless.", True),
        ("Hi, and we will come to Pioneer Auto Group.", True),
        ("When come to some is 22, when members come first.", True),
        # a person's promise, or the words anywhere but at the opening
        ("I will come to you tomorrow.", False),
        ("Oh hi, yes, I will come to the office.", False),
        ("Hello, Dana speaking, we will come to it.", False),
    ],
)
def test_a_welcome_opens_the_words_even_split_in_two(heard: str, welcome: bool) -> None:
    assert opens_with_welcome(words(heard)) is welcome


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # whisper tiny.en on cue sentences in 13 voices (docs/amd.md, fourteenth round)
        ("To repeat the option, President Turkey.", "machine-ivr"),
        ("The repeating option, Breath of Turkey.", "machine-ivr"),
        ("To repeat the motion, press the key.", "machine-ivr"),
        ("The repeat meme option, press the star key.", "machine-ivr"),
        ("To speak with an operator, press me a road.", "machine-ivr"),
        ("to speak with an operator, press near", "machine-ivr"),
        ("Please leave them carefully and I will mention options and change.", "machine-ivr"),
        ("a few words. Tell me why you are calling today.", "machine-ivr"),
        ("Please stay in the line and the next available representative.", "wait"),
        ("The number of being disconnected.", "machine-unavailable"),
        ("The number can be disconnected.", "machine-unavailable"),
        (
            "the mailbox belonging to extension for two one info and cannot accept new messages.",
            "machine-unavailable",
        ),
        # "The mailbox is full and cannot accept any messages at this time." in three
        # female espeak-ng voices: the mailbox and "messages" lost, the refusal kept
        (
            "Let my option fall and cannot have had any meaning at this time, don't worry.",
            "machine-unavailable",
        ),
        (
            "The mayo of people, and cannot have helped any mechanism at this time.",
            "machine-unavailable",
        ),
        ("Let me watch info and cannot ask any mechanism at this time.", "machine-unavailable"),
        # a person's words near those shapes
        ("I'm away and can't take any calls at this time.", None),
        ("I'm busy and can't make any more meetings today.", None),
        ("I'm travelling and cannot check my messages.", None),
        ("Wait, can you repeat that? The line is really bad.", None),
        ("I'll press the button on my end, give me a second.", None),
        ("To be honest, press on, I'm listening.", None),
        ("The number you gave me doesn't work, I tried it twice.", None),
        ("Please leave them at the front door, thanks.", None),
        ("Honestly, the order cannot be completed until Friday.", None),
        # "For English, press 1" with verb and key heard as one number, opening the turn
        ("for English 21", "machine-ivr"),
        ("Oh, for English 101, yes, that class.", None),
        ("Yes, I can stay on the line, go ahead.", None),
    ],
)
def test_what_the_recogniser_keeps_of_cue_sentences(heard: str, category: str | None) -> None:
    assert _verdict(heard) == category


@pytest.mark.parametrize(
    "heard",
    [
        # espeak-ng en-us+shelby and +aunty: "Please hang up and try again."
        "Please enter and try again.",
        # "Please try again later." with "later" lost
        "Please try again, Rader.",
    ],
)
def test_a_carriers_closing_with_its_reason_lost_is_a_carriers_hint(heard: str) -> None:
    verdict = classify_phrases([heard])
    assert verdict is not None and verdict.category == "machine-unavailable"
    assert verdict.strength < 0.85
    # with "please", the turn leans machine: the lexical model answers a carrier
    assert score_turn([heard]).category == "machine-unavailable"


@pytest.mark.parametrize(
    "said", ["Sorry, you're breaking up. Try again?", "Let me try again tomorrow.", "Try again."]
)
def test_a_person_who_says_try_again_is_no_carrier(said: str) -> None:
    assert classify_phrases([said]) is None


def test_a_mobile_phone_called_is_a_carriers_hint_when_its_state_is_lost() -> None:
    verdict = classify_phrases(["The mobile phone you are calling in which"])
    assert verdict is not None and verdict.category == "machine-unavailable"
    assert verdict.strength < 0.85
    assert classify_phrases(["Sorry, my mobile phone was off all morning."]) is None


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # "The mobile phone you are calling is switched off ...": the adjective lost
        # beside the noun (female espeak-ng voice), the party still named
        (
            "The normal phone you are calling is switched off or upside the cover in the "
            "area. Please call later.",
            "machine-unavailable",
        ),
        ("The little number you have dialed is not in service.", "machine-unavailable"),
        # a person naming someone we call about says no state of a line
        ("The lady you are calling about is my sister, who is this?", None),
        ("The best time you can call is after six.", None),
    ],
)
def test_a_party_named_in_two_words_is_a_carriers(heard: str, category: str | None) -> None:
    assert _verdict(heard) == category


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # "Please say the name of the person you would like to reach" (a directory):
        # "the name of" is someone else's name, not the screener's "say your name"
        (
            "Thank you for calling us, look you in verity. Please say the name of never "
            "can organize when you would like to read.",
            "machine-ivr",
        ),
        ("Please say the name of the department.", "machine-ivr"),
        # a person asking it of us
        ("Sorry, can you say the name of the street again?", None),
        # a screener's ask, its "your" heard as "the", still a screener's
        ("Please say the name and the reason for your call.", "machine-screening"),
        ("Thanks for calling. Please say your name after the tone.", "machine-screening"),
    ],
)
def test_the_name_of_someone_else_is_not_ours(heard: str, category: str | None) -> None:
    assert _verdict(heard) == category


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # "Thank you for calling Frontier Airlines. Briefly tell me what you're
        # calling about." with the thanks lost (aunty): a business asks, no screener
        (
            "And for calling for either airlines, briefly tell me what you're calling "
            "about. You can take things like both flights, mortgage, or flights.",
            "machine-ivr",
        ),
        # a screener's own "reason for calling", and no welcome at all
        ("Name and reason for calling, tell me why you're calling.", "machine-screening"),
        ("Briefly tell me what you're calling about.", "machine-screening"),
    ],
)
def test_a_welcome_whose_thanks_was_lost_is_a_welcome(heard: str, category: str | None) -> None:
    assert _verdict(heard) == category


def test_a_welcome_is_read_where_its_thanks_was_lost() -> None:
    assert opens_with_welcome(words("And for calling Frontier Airlines."))
    assert not opens_with_welcome(words("Sorry for calling so late, is Dana there?"))
