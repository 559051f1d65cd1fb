"""Menus and intercepts the recogniser garbled, recognised by what survives of their shape
(and a person's greeting the recogniser garbled into voicemail words, which is not).

The transcripts are what whisper tiny.en heard of espeak-ng voices over an 8 kHz
line (issue 19): from replays of the AMD suites (bench/amd.py --voices) and from
menus and greetings written for this purpose and never replayed. Each case
exercises a general rule; none names a fixture's words.
"""

from __future__ import annotations

import pytest

from amd.ivr import choose_option, menu_options
from amd.menu_shapes import is_press_like
from amd.phrases import classify_phrases


def _verdict(*turns: str) -> str | None:
    v = classify_phrases(list(turns))
    return None if v is None or v.strength < 0.85 else v.category


@pytest.mark.parametrize(
    "heard",
    [
        # the key verb heard as "pre" before each key, the keys as digits or words
        "Thank you for calling Metropower and Light, the report on how it is present one "
        "for milling pre-2, the start of the service pre-3.",
        "The year you're balanced, pre-form to make a payment, pre-form to the peak "
        "we're done again, pre-form year old.",
        "For hours and time actions, pre-fall the redeeming you pre-time.",
        # glued to its key: "PRET1"
        "Thank you for calling Armamento on new patients, PRET1 for listening patients, "
        "PRET2 for mailing PRET3.",
        # one verb-like word before two keys written as homophones
        "All over and my reaction, pray for the repeat statement, you pray to I in...",
        # a different word each time, the keys all different
        "Your call may be recorded for quality and training purposes. The track-up package, "
        "brave one! The head you'll have he got pressed to... for international Xi Jinping. "
        "Pre-3. for custom as or least pray for",
        "The report can help each great one. For me, let's press to tap or start on this "
        "press screen.",
        # "dial" heard as "now", the keys as "one" and "to"
        "And, for calling not a manual hospital, for appointment, now one, of restriction "
        "in retail, now to, all on a question, now narrow.",
    ],
)
def test_a_key_verb_heard_as_another_word_before_two_keys_is_a_menu(heard: str) -> None:
    assert _verdict(heard) == "machine-ivr"


def test_one_damaged_option_and_the_way_menus_end_is_a_menu() -> None:
    heard = (
        "Great one for appointment. 3-2-4-3-3-4-3-3-3-3 Let's read our viewing questions. "
        "For long long after all, please stay on the line."
    )
    assert _verdict(heard) == "machine-ivr"
    # the option alone, or a person's "great to", is not
    assert _verdict("Great one for appointment.") is None
    assert _verdict("Great to hear, please stay on the line.") == "wait"


def test_one_word_before_keys_counted_up_is_a_menu() -> None:
    assert _verdict("Trace 1 for sales, trace 2 for service, trace 3 for parts.") == "machine-ivr"
    assert _verdict("Prez 1. Billing. Prez 2. Orders. Prez 3.") == "machine-ivr"


@pytest.mark.parametrize(
    "heard",
    [
        "You have reached the chaos of where, if you know your path in extension, you may not "
        "have any time.",
        "You have reached clinical software. If you know you are part in extension, you may "
        "not any time from a company",
        "If you know the expansion of the post on your Mac or lean, you may not easily tell.",
        "Welcome to the next and below to reach someone's name and turn the first free letter "
        "on the last name now.",
        "You have reached the reverse ice-cleaning task. For that poor capacity, neither "
        "extension to hungry than 4.",
        "Please say my name on the person you are trying to reach.",
        # "extension" lost too (en-us+shelby): "your party" is a directory's word
        "You reach time insurance. If you know your party next session, you may know it at "
        "any time.",
        # "extension" heard as "next session", "party's" as "early" (en-us+Andrea)
        "You have reached clinical software. If you know your early next session, you "
        "may not have any time for a company next to your entire time.",
        # extension numbers have several digits
        "You have reached the river high clinic staff directory for October 10th, Nile "
        "extension 24, for October 10th, Nile extension 200th.",
    ],
)
def test_directory_prompts_keep_their_frame(heard: str) -> None:
    assert _verdict(heard) == "machine-ivr"


def test_a_party_we_know_is_no_directory_without_your_party() -> None:
    assert _verdict("If you know the party is tonight, let me know.") is None
    assert _verdict("If you know, I need the next session booked. Who is this?") is None
    assert _verdict("Oh hi, if you know your way here, just come by at any time.") is None


def test_a_directory_prompt_split_across_two_pieces_is_read_from_both() -> None:
    first, second = (
        "Welcome to master and Lord.",
        "to reach someone by name in the first three days and on the last name now.",
    )
    assert _verdict(first) is None
    assert _verdict(first, second) == "machine-ivr"


def test_a_language_named_before_a_damaged_key_verb_is_a_language_menu() -> None:
    assert _verdict("Tarot and your pre-men not for English pre-run.") == "machine-ivr"
    assert _verdict("For English, prezware, parafan, yolk, or premaku.") == "machine-ivr"
    # third round (espeak-ng en-us): "press" heard as "pray" / "prayer"
    assert _verdict("for English prayer, prayer, prayer, prayer.") == "machine-ivr"
    assert _verdict("For English, pray at once.") == "machine-ivr"
    assert _verdict("Hello? Yes, for English class. Who is this?") is None
    # the language right before its damaged key verb and key, whatever came before it
    # (espeak-ng RP and en-029, "For service in English, press one. Pour le service ...")
    assert _verdict("Welcome to the English present, one of all of them is in France.") == (
        "machine-ivr"
    )
    assert _verdict("or so, in the English prayer one.") == "machine-ivr"
    assert _verdict("I speak English, pretty well, 2 languages actually.") is None
    # a reply that names a language is no selection
    assert _verdict("In English, great, thanks.") is None
    assert _verdict("For English, great. Who is this?") is None
    # "For English, please stay on the line." with all but "for English, please" lost
    # (en-us+Andrea); a person asking for English says no more
    assert _verdict("For English, please tell them the right.") == "machine-ivr"
    assert _verdict("For English, please!") is None
    assert _verdict("In English, please, I don't speak it well.") is None


@pytest.mark.parametrize(
    "heard",
    [
        "The number you have dialed in for, please take the number and dial again.",
        # "call" heard as "goal": what is left is still only a carrier's
        "Your goal cannot be completed at this time. Please turn up and try again.",
        # the state a sentence after the party ("coverage area" lost)
        "The mobile phone you are calling is which or up high in the coming area. "
        "Please call later.",
        "I'm sorry, this number has been temporarily connected to the customer request.",
        "I'm sorry, this number has been for a really disconnecting at the customer request.",
        "The customer not holding cannot reach that time. Please try again later.",
        "Therefore, if y'all come not be completing a Nile, please get number and try again.",
        "Please stand up and try again.",
        # third round (espeak-ng en-us): "the number you have dialed" keeps only its
        # relative clause; the state comes in the next piece
        "But the primer you can dial the not better their moist may lock yet. "
        "Please try again later. Goodbye.",
        "But the primer you can file did not enable at the moment. Please try again later.",
        # fourth round (espeak-ng RP): "The mailbox is full and cannot accept any
        # messages at this time", its nouns lost
        "Let me lock in full and cannot accept any medicine in this time, don't lie.",
        # twenty-fifth round (espeak-ng en-us+Andrea): the party's noun kept, its
        # article and adjective lost, and "again" lost from the closing
        "The word of customer you are calling is not available, please try your calling later.",
        # the party lost but what we did to it, the state a line's
        "I'm a welcome, you are calling in for stuff, or upside the camera in your rear, "
        "please call later.",
        # "could not be completed as dialed": the call completed as dialled
        "We hurry, you're talking about the completed dial. Please get number and dragon.",
    ],
)
def test_carrier_wording_that_survives_is_an_intercept(heard: str) -> None:
    assert _verdict(heard) == "machine-unavailable"


def test_a_carrier_message_split_across_two_pieces_is_read_from_the_pair() -> None:
    first = "The mobile phone-to-acolining switch to all of the high recovery areas."
    assert _verdict(first) is None
    assert _verdict(f"{first} Please call later.") == "machine-unavailable"


def test_a_person_putting_us_off_is_no_carrier() -> None:
    assert _verdict("She's not available, try again later.") is None
    assert _verdict("He stepped out. Can you call later?") is None
    # "the <thing> you <did>" is a carrier's party only when we dialled it
    assert _verdict("The part you ordered is not in yet, try again later.") is None
    assert _verdict("The one you can file is gone, sorry.") is None
    # a full practice is no full mailbox
    assert _verdict("Sorry, we're fully booked and cannot accept new patients.") is None
    # with only "you are calling" left of the party, a person's state is no line's
    assert _verdict("Sorry, you are calling the wrong number, he no longer lives here.") is None
    assert _verdict("Oh, you are calling about the car? Try again, I can't hear you.") is None
    # a file completed is no call completed as dialled
    assert _verdict("I completed the file yesterday, try again later.") is None


def test_a_verbless_option_list_counts_its_keys_up() -> None:
    assert _verdict("1 for sales, 2 for service, 0 for the operator.") == "machine-ivr"
    assert _verdict("Pound for more options, star for the previous menu.") == "machine-ivr"


@pytest.mark.parametrize(
    "said",
    [
        # one damaged option is no menu: what a person answering may be heard as
        "Great one. I don't know what you mean to this.",
        "Yes, I can do it for the morning and run for the afternoon.",
        "Pray for us, it's been a long week. Who is this?",
        "Great, to be honest, I was waiting for you.",
        # keys counted up after a digit may be a phone number
        "It's three one three, two three three, four five six seven.",
        "Sure, my normal sign sign sign 21-2496.",
        # a receptionist asking about a name, an extension, or a pre-owned car
        "Do you know his extension? I can transfer you.",
        "What's the name of the person you're calling for?",
        "Can I get your first and last name, please?",
        "Front desk, this is Carla. Sorry, which extension did you need?",
        "Thanks for calling, we have pre-owned and pre-certified cars. How can I help?",
        "Hi, yes, this is the front deck. How can I build you?",
        "Hello, meeting market, who's calling it?",
        "Break time, I got two minutes. Grab two coffees for us.",
        # keys counted down are a person's plans, not a menu's options
        "Yes, I can do two for the morning and one for the afternoon.",
        # numbers in ordinary speech after the same word
        "I'm here for you, give me 1 second, give me 2.",
        "For tonight we have room 5, and room 6 for tomorrow.",
    ],
)
def test_people_heard_through_the_same_damage_give_no_menu(said: str) -> None:
    assert _verdict(said) is None


@pytest.mark.parametrize(
    ("word", "like"),
    [
        ("pre", True),
        ("pret", True),
        ("pray", True),
        ("brave", True),
        ("great", True),
        ("print", True),
    ]
    + [("tree", False), ("dress", False), ("less", False), ("three", False), ("pass", False)],
)
def test_what_counts_as_press_heard_otherwise(word: str, like: bool) -> None:
    assert is_press_like(word) is like


def test_the_menu_reader_presses_keys_after_verbs_the_recogniser_damaged() -> None:
    heard = (
        "Thank you for calling, have or ventil for new patients, Pre-1 for existing patients, "
        "Pre-2 for building Pre-3."
    )
    options = menu_options(heard)
    assert [o.digit for o in options] == ["1", "2", "3"]
    assert choose_option(options, "existing patients") == "2"
    assert [
        o.digit for o in menu_options("For hours, pray for. For the directory, brave one.")
    ] == [
        "4",
        "1",
    ]
    # not after a word that only ends like a verb
    assert menu_options("Less two for sales, dress one for billing") == []


def test_please_leave_alone_is_no_voicemail() -> None:
    # a receptionist's "Thanks for calling Oakridge Pharmacy, this is Devon", as heard
    assert _verdict("Thanks for calling your Twitch family. Please leave me a comment.") is None
    assert _verdict("Please leave a message.") == "machine-vm"
    assert _verdict("Please leave your name and number after the tone.") == "machine-vm"
    assert _verdict("Please leave", "a message after the tone.") == "machine-vm"


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # espeak-ng RP: "Please say your name after the tone, and I'll see if ..."
        (
            "Please hear your name after my phone, and I'll see if this person in my mailable.",
            "machine-screening",
        ),
        # a voicemail asks to leave the name, and with the number
        ("Please leave your name after the tone.", "machine-vm"),
        ("Please leave your number and your name after the beep.", "machine-vm"),
        # a person asking for a name
        ("Can I get your name at all?", None),
        ("Sorry, what was your name again?", None),
        ("What's your name after all this time?", None),
    ],
)
def test_a_name_asked_for_alone_before_a_tone_is_a_screener(
    heard: str, category: str | None
) -> None:
    assert _verdict(heard) == category


def test_a_menu_announcing_its_options_is_a_menu_with_its_verb_lost() -> None:
    # espeak-ng en-029: "Please choose from the following options." as heard
    assert _verdict("Please tune from the following option.") == "machine-ivr"
    assert _verdict("Please choose from the following options.") == "machine-ivr"
    assert _verdict("I'm off from the following Monday, who is this?") is None


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # "You've reached Lakeview Motors. Which department would you like? Just say
        # sales, service, or parts." in Piper, RP and en-029: "say" and the list are lost
        (
            "You've reached Lakeview Motors, which department would you like? just a sales "
            "service or parts.",
            "machine-ivr",
        ),
        (
            "You reach, break new motors. Which departments would you like? So, meet all past.",
            "machine-ivr",
        ),
        # a receptionist asks it without announcing where we called
        ("Lakeview Motors, which department would you like?", None),
        ("I couldn't reach him. Which department was that?", None),
    ],
)
def test_a_recording_asking_which_department_is_a_spoken_menu(
    heard: str, category: str | None
) -> None:
    assert _verdict(heard) == category


@pytest.mark.parametrize(
    "heard",
    [
        # verb and key both lost, the options' frame kept: "For X, <two words>." twice
        "Hi, thanks for calling Normaltman. How can we tell you today? For taking and "
        "failing, pray one. For 3d card, 3d food.",
        "Thanks for joining us, I'll see you next time. For appointment, Niles run. For "
        "pre-preaps shalln't reveal, now I'll do.",
        # a condition each, the same tail after it
        "Thank you for calling right my event. If you have a new patient, see you later "
        "on. If you have an existing patient, see you later.",
        # an aim each
        "Welcome to the Hollow Clinic. To book a visit, brain won. To talk to a nurse, "
        "brain through.",
    ],
)
def test_two_options_framed_alike_are_a_menu_though_verb_and_key_were_lost(heard: str) -> None:
    assert _verdict(heard) == "machine-ivr"


@pytest.mark.parametrize(
    "said",
    [
        "For sure, go ahead.",
        "If you can, call me back. If not, no worries.",
        "Hello, this is Dana. For real, who is this?",
        "For now, I'm in a meeting. Can you call back?",
        "To be honest, I'm busy. Who is this?",
        # two framed sentences with different openers are not a list
        "If you need me, I'm here. For now, go ahead.",
    ],
)
def test_one_option_like_sentence_or_two_unlike_ones_are_no_menu(said: str) -> None:
    assert _verdict(said) is None


@pytest.mark.parametrize(
    "heard",
    [
        # one option kept its frame, its verb glued to its key (espeak-ng en-gb-scotland)
        "You have reached Sino-Mali clinic. For elaborate notes, presto!",
        # or its verb misheard, its key kept
        "To report an outage, pray 1.",
        "If you are a new patient, brave 2.",
        # the key written as a word (espeak-ng West Midlands)
        "You are great. Thank you very much. For Thomas E. Owen, Great One.",
    ],
)
def test_one_framed_option_with_a_damaged_key_verb_is_a_menu(heard: str) -> None:
    assert _verdict(heard) == "machine-ivr"


@pytest.mark.parametrize(
    "said",
    [
        # the tail is no key verb and key, or there is no option's frame
        "Great, one for you.",
        "For real, who is this?",
        "For the record, I'm busy.",
        "Yeah, great one. Who is this?",
        "Oh, that's a great one, who is this?",
        # a common word after the verb-like word is no key ("pray for", "great to")
        "For what it's worth, great to hear from you.",
    ],
)
def test_a_damaged_key_verb_without_an_options_frame_is_no_menu(said: str) -> None:
    assert _verdict(said) is None


@pytest.mark.parametrize(
    "heard",
    [
        # "To check on an order, press one." with its opener lost (en-us+Andrea)
        "Make the check-out order, press one.",
        # "For pharmacy hours, press 1. For lab results, ...": the next option's
        # opener after another comma
        "All time of the hour, press one, or let me know.",
        "Billing and payments, dial 2.",
    ],
)
def test_a_clause_of_only_press_and_a_key_after_a_purpose_is_a_menu(heard: str) -> None:
    assert _verdict(heard) == "machine-ivr"


@pytest.mark.parametrize(
    "said",
    [
        # no purpose before it, no key after the verb, or someone speaking as "I"
        "Okay, press one.",
        "To be honest, press on, I'm listening.",
        "I told you already, press one.",
        "Hi, this is Dana, press the button.",
    ],
)
def test_press_and_a_key_without_a_purpose_before_it_is_no_menu(said: str) -> None:
    assert _verdict(said) is None


# -- what unheard voices taught (issue 19, ninth round: espeak-ng en-gb-scotland and
# en-us-nyc, voices the suites were never tuned on) --------------------------------


@pytest.mark.parametrize(
    "heard",
    [
        # "press" glued to a key written as a word: "prefto", "presto" ("press two")
        "Hi, thanks for calling Cobalt Bank. How can we help you today for checking and "
        "saving Prev1 for credit card, prefto",
        "For appointments, prefour. For billing, presto.",
        # "print" for "press": a stop, "r", a front vowel
        "For English, print one. For Spanish, print two.",
        # two keys heard as homophones of one digit are still two keys
        "For billing, pray through, for pharmacy, pray free.",
    ],
)
def test_key_verbs_and_keys_damaged_in_other_ways_are_still_options(heard: str) -> None:
    assert _verdict(heard) == "machine-ivr"


def test_a_language_named_before_print_and_a_key_is_a_language_menu() -> None:
    assert _verdict("For service in English, print one.") == "machine-ivr"
    assert _verdict("For English, print one. For punished, pray through.") == "machine-ivr"


@pytest.mark.parametrize(
    ("heard", "category"),
    [
        # "Please say the name of the person or department you would like to reach":
        # "the" heard as "my" reads like a screener's "say your name", the rest is a directory
        (
            "Thank you for calling Westfield. Please say my name I'm the person for the "
            "apartment you would like to reach.",
            "machine-ivr",
        ),
        ("Please spell the name of the party you wish to reach.", "machine-ivr"),
        ("Please state the name of the party you wish to reach.", "machine-ivr"),
        # a receptionist's question asks nothing to be said or entered
        ("What's the name of the person you'd like to reach?", None),
        # our own name asked for is a screener's ask, never a directory
        ("Can you say your name and who you would like to reach?", "machine-screening"),
        ("Who would you like to reach? I can put you through.", None),
    ],
)
def test_a_name_asked_for_then_whom_you_would_reach_is_a_directory(
    heard: str, category: str | None
) -> None:
    assert _verdict(heard) == category


def test_a_data_entry_prompt_ending_in_a_sign_is_a_menu_with_its_key_lost() -> None:
    # "Please enter your account number, followed by the pound sign"
    heard = "Clean into your account number, follow my mopone sign."
    assert _verdict(heard) == "machine-ivr"
    assert _verdict("Follow the signs to the lobby, I'll meet you there.") is None
    assert _verdict("Sure, I'll follow up. Who's this?") is None


def test_followed_by_heard_as_following_still_ends_a_data_entry_prompt() -> None:
    # whisper tiny.en writes "followed by the pound sign" as "following the phone sign"
    heard = "This is the water for me, playing into your account number, following the phone sign."
    assert _verdict(heard) == "machine-ivr"
    # "following" is also a plain word: a sign right after it, or a key, is no prompt
    assert _verdict("I need the following sign-off from your manager.") is None
    assert _verdict("Here are the following key points for the meeting.") is None
    assert _verdict("Please sign the following form when you come in.") is None


def test_which_department_with_a_word_slipped_in_is_still_the_recordings_question() -> None:
    heard = "You've reached Lake New Motors, which the department would you like, just stay ill."
    assert _verdict(heard) == "machine-ivr"
    assert _verdict("Lake New Motors, which the department would you like?") is None


def test_which_department_with_its_first_syllable_lost_is_still_the_recordings_question() -> None:
    # whisper tiny.en writes "department" as "the apartment" in two espeak-ng accents
    heard = "You've reached Lake New Morgan, which the apartment won't you like, not say pale."
    assert _verdict(heard) == "machine-ivr"
    # a person at an apartment block asks it without announcing where we called
    assert _verdict("Oak Towers, which apartment are you calling about?") is None


@pytest.mark.parametrize(
    "heard",
    [
        # "I'm sorry, the number you have dialed has been temporarily disconnected at the
        # customer's request", the party lost
        "I'm sorry, this humbles and being temporarily disconnected at a customer request.",
        "I'm sorry, the tumbler has been simply willing to connect to not in the customer request.",
        "We're sorry, your goal is not in service. Please check the number.",
    ],
)
def test_an_apology_then_a_state_only_carriers_announce_is_an_intercept(heard: str) -> None:
    assert _verdict(heard) == "machine-unavailable"


@pytest.mark.parametrize(
    "said",
    [
        "Sorry, we got disconnected earlier. Who is this?",
        "I'm sorry, she's not in the office, can you try again later?",
        "Sorry, he's no longer with the company.",
        "Hello? Sorry, the line was disconnected. Who's calling?",
        "Presto, I'm here. Who's this?",
        "I need to print one copy for you, then two more.",
        "Sorry, I'm at the printer. Who is this?",
    ],
)
def test_people_apologising_or_printing_give_no_machine_evidence(said: str) -> None:
    assert _verdict(said) is None
