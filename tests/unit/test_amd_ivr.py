"""Reading IVR menus and choosing the key toward the call's goal."""

from __future__ import annotations

import pytest

from amd.ivr import PERSON_GOAL, SEND_GOAL, MenuOption, choose_option, menu_options


def _digits(text: str) -> dict[str, str]:
    return {o.digit: o.description for o in menu_options(text)}


@pytest.mark.parametrize(
    ("text", "digit", "word"),
    [
        ("For billing, press 2.", "2", "billing"),
        ("Press 1 for appointments.", "1", "appointments"),
        ("To refill a prescription, press one.", "1", "prescription"),
        ("If you know your party's extension, press pound.", "#", "extension"),
        ("To speak with a representative press 0.", "0", "representative"),
        ("For the pharmacy, press star.", "*", "pharmacy"),
        ("For billing press the 4 key.", "4", "billing"),
    ],
)
def test_menu_phrasings(text: str, digit: str, word: str) -> None:
    options = _digits(text)
    assert list(options) == [digit]
    assert word in options[digit]


def test_each_key_gets_its_own_description() -> None:
    options = _digits(
        "Thank you for calling Acme. For billing, press 2. For appointments, press 3. "
        "To speak with a representative, press 0."
    )
    assert list(options) == ["2", "3", "0"]
    assert "billing" in options["2"] and "appointments" not in options["2"]
    assert "appointments" in options["3"]
    assert "representative" in options["0"]


def test_keys_first_menu_keeps_each_description_with_its_key() -> None:
    options = _digits("Press 1 for appointments. Press 2 for billing. Press 3 for the pharmacy.")
    assert "appointments" in options["1"]
    assert "billing" in options["2"]
    assert "pharmacy" in options["3"]


def test_first_mention_of_a_key_wins() -> None:
    options = menu_options("For sales press 1. For billing press 2. For sales press 1.")
    assert [o.digit for o in options] == ["1", "2"]


def test_text_without_keys_has_no_options() -> None:
    assert menu_options("Thank you for calling. Your call is important to us.") == []


@pytest.mark.parametrize(
    ("goal", "digit"),
    [("billing", "2"), ("appointment", "3"), ("prescription refill", "4")],
)
def test_goal_matching(goal: str, digit: str) -> None:
    options = menu_options(
        "For billing, press 2. For appointments, press 3. To refill a prescription, press 4. "
        "For all other questions, press 0 to reach an operator."
    )
    assert choose_option(options, goal) == digit


def test_no_match_falls_back_to_reaching_a_person() -> None:
    options = menu_options(
        "For store hours, press 1. For directions, press 2. "
        "To speak with a representative, press 0."
    )
    assert choose_option(options, "billing") == "0"
    assert choose_option(options, "") == "0"


@pytest.mark.parametrize(
    "menu",
    [
        "To repeat this menu, press 9. For directions, press 2.",
        "To hear these options again, press 9. For directions, press 2.",
        "To return to the main menu, press star. For directions, press 2.",
        "To go back to the previous menu, press 8. For directions, press 2.",
    ],
)
def test_menu_navigation_is_never_chosen(menu: str) -> None:
    options = menu_options(menu)
    for goal in ("menu", "options again", "repeat", "main menu", "previous", "directions"):
        assert choose_option(options, goal) in ("2", None)
    assert choose_option(options, "directions") == "2"


def test_re_record_is_never_chosen() -> None:
    options = menu_options("To re-record your message, press 1. To rerecord, press 3.")
    assert choose_option(options, "re-record message") is None
    assert choose_option(options, SEND_GOAL) is None


def test_english_is_chosen_in_a_language_menu() -> None:
    options = menu_options("Para español, oprima el dos. For English, press 1.")
    assert choose_option(options, "billing") == "1"


def test_none_when_nothing_fits() -> None:
    options = menu_options("For store hours, press 1. For directions, press 2.")
    assert choose_option(options, "billing") is None
    assert choose_option([], "billing") is None


def test_send_goal_picks_the_send_option_in_a_post_message_menu() -> None:
    text = (
        "To send this message, press 1. To listen to your message, press 2. To re-record, press 3."
    )
    assert choose_option(menu_options(text), SEND_GOAL) == "1"
    text = "To re-record your message press 1. To deliver it now press 2."
    assert choose_option(menu_options(text), SEND_GOAL) == "2"


def test_best_scoring_option_wins_and_ties_go_to_the_first_offered() -> None:
    options = [
        MenuOption("1", "for customer support"),
        MenuOption("2", "to speak with a customer service representative"),
        MenuOption("3", "for an operator"),
    ]
    assert choose_option(options, PERSON_GOAL) == "2"  # customer + service + representative
    assert choose_option(options[::2], PERSON_GOAL) == "1"  # support vs operator: first


@pytest.mark.parametrize(
    "text",
    [
        "for sales press 1 for billing press 2 for service press 3",
        "press 1 for sales press 2 for billing press 3 for service",
    ],
)
def test_menu_without_punctuation(text: str) -> None:
    options = _digits(text)
    assert list(options) == ["1", "2", "3"]
    assert choose_option(menu_options(text), "billing") == "2"
    assert choose_option(menu_options(text), "sales") == "1"


@pytest.mark.parametrize(
    ("text", "options"),
    [
        # whisper tiny.en on espeak-ng voices over 8 kHz lines
        ("For English, Preth one! Para espanol, oprima dos.", [("1", "for english")]),
        ("For billing, Pref2. For sales, prez 3.", [("2", "for billing"), ("3", "for sales")]),
        ("To reach the pharmacy, preth to.", [("2", "to reach the pharmacy")]),
    ],
)
def test_key_verbs_the_recogniser_damaged_still_give_keys(
    text: str, options: list[tuple[str, str]]
) -> None:
    assert menu_options(text) == [MenuOption(d, desc) for d, desc in options]


@pytest.mark.parametrize(
    "text",
    [
        "Thanks, no less two hundred people called today.",  # "less" only sounds like it
        "The fresh one is on the left.",
        "Dress one size up.",
    ],
)
def test_words_that_only_resemble_a_key_verb_give_no_options(text: str) -> None:
    assert menu_options(text) == []
