"""Watchdog: heuristic ballot answers, cadence, acting bands, modes, timeouts, goal, close."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import pytest
from livekit.agents import llm

from agent.core import clock
from guardrails.ballot_heuristics import HeuristicBallotModel, ballot_flags
from guardrails.watchdog import (
    ACT_AT,
    DEFAULT_TIMEOUT,
    LOG_FROM,
    Q_DRIFTING,
    Q_LOOPING,
    Q_ON_TRACK,
    Q_PERSONA,
    Q_UNSAFE,
    Q_UNVERIFIED,
    REMINDERS,
    Finding,
    Verdict,
    Watchdog,
    ballot_decisions,
    ballot_input,
)
from tests.fakes.models import ScriptedDecisionModel

GOAL = "Confirm the dental appointment on Tuesday at 3pm"
ASK_DOB = "Could you please tell me your date of birth?"
LOOPING = [("agent", ASK_DOB), ("caller", "Why do you need that?"), ("agent", ASK_DOB)]
CALM = [
    ("agent", "Hi, this is Sam from Acme Dental about your appointment on Tuesday."),
    ("caller", "Oh yes."),
    ("agent", "Is 3pm on Tuesday still good for your dental appointment?"),
]
Turns = list[tuple[str, str]]


def _run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return clock.run(main())


def _flags(turns: Turns, goal: str = GOAL) -> dict[str, float]:
    return ballot_flags(ballot_input(goal, turns))


def _oracle(delay: float = 0.0, **flags: float) -> ScriptedDecisionModel:
    """An oracle answering ``flags`` by question; on track and 0.0 for the rest."""

    def answer(text: str, name: str) -> float:
        return flags.get(name, 2 if name == Q_ON_TRACK else 0.0)

    return ScriptedDecisionModel(answer, delay=delay)


class _Calls:
    """Records interrupt callbacks and log events (with the loop time they arrived)."""

    def __init__(self) -> None:
        self.interrupts: list[tuple[str, tuple[Finding, ...]]] = []
        self.events: list[tuple[float, dict[str, Any]]] = []

    def interrupt(self, run_id: str, findings: tuple[Finding, ...]) -> None:
        self.interrupts.append((run_id, findings))

    def log(self, event: dict[str, Any]) -> None:
        self.events.append((asyncio.get_running_loop().time(), event))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for _, e in self.events if e["event"] == name]


def _watchdog(calls: _Calls, turns: Sequence[tuple[str, str]] = (), **kwargs: Any) -> Watchdog:
    kwargs.setdefault("goal", GOAL)
    wd = Watchdog(log=calls.log, **kwargs)
    for role, text in turns:
        wd.observe(role, text)
    return wd


def _requests(wd: Watchdog, calls: _Calls, first: int, count: int) -> None:
    for i in range(first, first + count):
        wd.request(f"run_{i}", calls.interrupt)


# -- heuristics --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "positive", "negative"),
    [
        (Q_LOOPING, LOOPING, CALM),
        (
            Q_PERSONA,
            [("caller", "Are you a real person?"), ("agent", "As an AI language model, I can't.")],
            [("caller", "Who is this?"), ("agent", "This is Sam from Acme Dental.")],
        ),
        (
            Q_UNVERIFIED,
            [("caller", "Cancel it."), ("agent", "I've cancelled your appointment. All set!")],
            [
                ("caller", "Cancel it."),
                ("tool", '{"status": "cancelled", "id": 42}'),
                ("agent", "I've cancelled your appointment. All set!"),
            ],
        ),
        (
            Q_UNSAFE,
            [("agent", "To verify you, please read me your full card number and PIN.")],
            [("agent", "To verify you, could you confirm the last four digits of your card?")],
        ),
        (
            Q_UNSAFE,
            [("agent", "Okay, I'll go ahead and delete your account now.")],
            [("agent", "Do you want me to delete your account? It cannot be undone.")],
        ),
    ],
)
def test_heuristics_flag_clear_examples(question: str, positive: Turns, negative: Turns) -> None:
    assert _flags(positive)[question] >= ACT_AT
    assert _flags(negative)[question] < LOG_FROM


def test_looping_grows_with_the_number_of_repeats() -> None:
    twice = _flags([("agent", ASK_DOB), ("agent", ASK_DOB)])[Q_LOOPING]
    thrice = _flags([("agent", ASK_DOB), ("agent", ASK_DOB.lower()), ("agent", ASK_DOB)])
    assert 0.8 <= twice < thrice[Q_LOOPING]
    assert thrice[Q_LOOPING] >= 0.9
    assert _flags([("agent", "Okay."), ("agent", "Okay.")])[Q_LOOPING] < ACT_AT


def test_drift_is_low_on_goal_moderate_off_it_and_never_acts() -> None:
    assert _flags(CALM)[Q_DRIFTING] < LOG_FROM
    off_topic = [
        ("agent", "By the way, have you heard about our new credit card with travel rewards?"),
        ("caller", "No."),
        ("agent", "It also gives cashback on groceries and fuel purchases worldwide."),
    ]
    assert LOG_FROM <= _flags(off_topic)[Q_DRIFTING] < ACT_AT
    assert _flags(off_topic, goal="")[Q_DRIFTING] < LOG_FROM


def test_a_failed_tool_result_does_not_verify_a_claim() -> None:
    turns = [("tool", "error: appointment not found"), ("agent", "Done, it's cancelled.")]
    assert _flags(turns)[Q_UNVERIFIED] >= ACT_AT
    plan = [("agent", "Once I've booked it, I'll text you. Shall I go ahead?")]
    assert _flags(plan)[Q_UNVERIFIED] < LOG_FROM


def test_on_track_follows_the_worst_other_flag() -> None:
    assert _flags(LOOPING)[Q_ON_TRACK] >= ACT_AT
    assert _flags(CALM)[Q_ON_TRACK] < LOG_FROM


async def test_heuristic_model_answers_exactly_the_requested_decisions() -> None:
    decisions: dict[str, llm.Decision] = {
        **ballot_decisions(),
        "weather": llm.Probability("It rains."),
    }
    response = await HeuristicBallotModel().evaluate(
        input=ballot_input(GOAL, CALM), decisions=decisions
    )
    assert set(response.results) == set(ballot_decisions())
    assert set(response.errors) == {"weather"}
    score = response.results[Q_ON_TRACK]
    assert isinstance(score, llm.ScoreResult)
    assert score.value > 1.5  # near "on track"


# -- cadence -----------------------------------------------------------------------


def test_a_ballot_starts_on_every_third_request_and_only_one_at_a_time() -> None:
    async def main() -> tuple[list[int], int, _Calls]:
        calls = _Calls()
        oracle = _oracle(delay=10.0)
        wd = _watchdog(calls, CALM, oracle=oracle, timeout=20.0)
        seen = []
        for i in range(1, 10):
            wd.request(f"run_{i}", calls.interrupt)
            await asyncio.sleep(0.1)
            seen.append(len(oracle.inputs))
        await wd.wait()
        _requests(wd, calls, 10, 3)
        await wd.wait()
        return seen, len(oracle.inputs), calls

    seen, total, calls = _run(main)
    # the ballot of request 3 is still running at requests 6 and 9: no second one
    assert seen == [0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert [e["request"] for e in calls.named("watchdog_busy")] == [6, 9]
    assert total == 2


def test_request_never_blocks_and_off_never_asks() -> None:
    async def main() -> tuple[float, list[str], Verdict, list[Any]]:
        calls = _Calls()
        oracle = _oracle(**{Q_LOOPING: 0.99})
        wd = _watchdog(calls, LOOPING, oracle=oracle, mode="off")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        _requests(wd, calls, 1, 9)
        await asyncio.sleep(5)
        return loop.time() - t0 - 5, wd.reminders(), await wd.ballot(), oracle.inputs

    waited, reminders, verdict, inputs = _run(main)
    assert waited == pytest.approx(0.0)
    assert (reminders, verdict.act, inputs) == ([], (), [])


# -- mode on -----------------------------------------------------------------------


def test_looping_interrupts_the_latest_run_and_reminds_at_the_next_boundary() -> None:
    async def main() -> tuple[_Calls, list[str], list[str], Watchdog]:
        calls = _Calls()
        wd = _watchdog(calls, LOOPING)
        _requests(wd, calls, 1, 3)
        wd.request("run_4", calls.interrupt)  # the latest request when the verdict lands
        await wd.wait()
        return calls, wd.reminders(), wd.reminders(), wd

    calls, first, second, wd = _run(main)
    ((run_id, findings),) = calls.interrupts
    assert run_id == "run_4"
    assert [f.id for f in findings] == [Q_LOOPING]
    assert findings[0].severity == "blocker" and findings[0].source == "heuristic"
    assert first[0].startswith(REMINDERS[Q_LOOPING])
    assert second == []  # handed out once
    (verdict,) = wd.verdicts
    assert verdict.act[0].id == Q_LOOPING  # most severe first
    # logs carry ids and numbers, never what was said
    assert "birth" not in repr(calls.events)


def test_a_concern_reminds_without_interrupting_and_a_nit_rides_along() -> None:
    async def main() -> tuple[_Calls, list[str]]:
        calls = _Calls()
        oracle = _oracle(**{Q_PERSONA: 0.9, Q_ON_TRACK: 0})
        wd = _watchdog(calls, CALM, oracle=oracle)
        _requests(wd, calls, 1, 3)
        await wd.wait()
        return calls, wd.reminders()

    calls, reminders = _run(main)
    assert calls.interrupts == []
    (reminder,) = reminders
    assert reminder.startswith(REMINDERS[Q_PERSONA])
    assert reminder.endswith(REMINDERS[Q_ON_TRACK])
    (verdict,) = calls.named("watchdog_verdict")
    assert [f["id"] for f in verdict["act"]] == [Q_PERSONA, Q_ON_TRACK]
    assert verdict["source"] == "oracle"


def test_a_nit_alone_goes_at_the_next_boundary() -> None:
    async def main() -> list[str]:
        calls = _Calls()
        wd = _watchdog(calls, CALM, oracle=_oracle(**{Q_ON_TRACK: 0}))
        await wd.ballot()
        return wd.reminders()

    assert _run(main) == [REMINDERS[Q_ON_TRACK]]


def test_the_band_is_logged_only() -> None:
    async def main() -> tuple[_Calls, list[str], Verdict]:
        calls = _Calls()
        wd = _watchdog(calls, CALM, oracle=_oracle(**{Q_DRIFTING: 0.5, Q_LOOPING: 0.2}))
        verdict = await wd.ballot()
        return calls, wd.reminders(), verdict

    calls, reminders, verdict = _run(main)
    assert verdict.act == ()
    assert [(f.id, f.p) for f in verdict.logged] == [(Q_DRIFTING, 0.5)]
    assert reminders == [] and calls.interrupts == []


def test_the_same_reminder_is_not_handed_out_at_two_boundaries_in_a_row() -> None:
    async def main() -> list[list[str]]:
        calls = _Calls()
        wd = _watchdog(calls, CALM, oracle=_oracle(**{Q_UNVERIFIED: 0.9}), every=1)
        given = []
        for i in range(3):
            wd.request(f"run_{i}", calls.interrupt)
            await wd.wait()
            given.append(wd.reminders())
        return given

    assert _run(main) == [[REMINDERS[Q_UNVERIFIED]], [], [REMINDERS[Q_UNVERIFIED]]]


# -- shadow ------------------------------------------------------------------------


def test_shadow_logs_what_it_would_do_and_changes_nothing() -> None:
    async def main() -> tuple[_Calls, list[str]]:
        calls = _Calls()
        wd = _watchdog(calls, LOOPING, mode="shadow")
        _requests(wd, calls, 1, 3)
        await wd.wait()
        return calls, wd.reminders()

    calls, reminders = _run(main)
    assert calls.interrupts == [] and reminders == []
    (shadow,) = calls.named("watchdog_shadow")
    assert shadow["would_interrupt"] == "run_3"
    assert Q_LOOPING in shadow["would_remind"]
    assert shadow["findings"][0]["id"] == Q_LOOPING


# -- oracle failures ---------------------------------------------------------------


def test_a_hanging_oracle_falls_back_to_the_heuristics_after_the_timeout() -> None:
    async def main() -> tuple[float, _Calls, ScriptedDecisionModel, Watchdog]:
        calls = _Calls()
        oracle = ScriptedDecisionModel(hang=True)
        wd = _watchdog(calls, LOOPING, oracle=oracle)
        loop = asyncio.get_running_loop()
        _requests(wd, calls, 1, 3)
        returned_at = loop.time()
        await wd.wait()
        return returned_at, calls, oracle, wd

    returned_at, calls, oracle, wd = _run(main)
    assert returned_at == 0.0
    ((at, verdict),) = [(t, e) for t, e in calls.events if e["event"] == "watchdog_verdict"]
    assert at == pytest.approx(DEFAULT_TIMEOUT)
    assert verdict["source"] == "heuristic"
    assert all(f.source == "heuristic" for f in wd.verdicts[0].act)
    assert oracle.cancelled == 1
    assert calls.interrupts[0][1][0].id == Q_LOOPING


def test_an_oracle_that_raises_falls_back_without_an_exception() -> None:
    async def main() -> tuple[Verdict, _Calls]:
        calls = _Calls()
        oracle = ScriptedDecisionModel(fail=RuntimeError("boom"))
        wd = _watchdog(calls, LOOPING, oracle=oracle)
        _requests(wd, calls, 1, 3)
        await wd.wait()
        return wd.verdicts[0], calls

    verdict, calls = _run(main)
    assert verdict.source == "heuristic"
    assert verdict.act[0].id == Q_LOOPING
    assert calls.named("watchdog_error") == []


def test_a_failing_interrupt_callback_is_logged_not_raised() -> None:
    def broken(run_id: str, findings: tuple[Finding, ...]) -> None:
        raise RuntimeError("gone")

    async def main() -> tuple[_Calls, list[str]]:
        calls = _Calls()
        wd = _watchdog(calls, LOOPING, every=1)
        wd.request("run_1", broken)
        await wd.wait()
        return calls, wd.reminders()

    calls, reminders = _run(main)
    assert [e["where"] for e in calls.named("watchdog_error")] == ["interrupt"]
    assert reminders[0].startswith(REMINDERS[Q_LOOPING])


# -- goal, settle, close -----------------------------------------------------------


def test_set_goal_drops_pending_reminders_and_a_running_ballot() -> None:
    async def main() -> tuple[list[str], _Calls, Watchdog, list[str]]:
        calls = _Calls()
        oracle = _oracle(delay=1.0, **{Q_LOOPING: 0.9, Q_PERSONA: 0.9})
        wd = _watchdog(calls, LOOPING, oracle=oracle)
        _requests(wd, calls, 1, 3)
        await wd.wait()  # a verdict: two reminders pending
        _requests(wd, calls, 4, 3)  # a second ballot is running
        wd.set_goal("Reschedule the cleaning")
        dropped = wd.reminders()
        await asyncio.sleep(5)
        _requests(wd, calls, 7, 3)  # cadence carries on, on the new goal's turns
        await wd.wait()
        return dropped, calls, wd, oracle.inputs

    dropped, calls, wd, inputs = _run(main)
    assert dropped == []
    assert len(wd.verdicts) == 2  # the ballot of request 6 was dropped
    assert [run for run, _ in calls.interrupts] == ["run_3", "run_9"]
    assert inputs[-1] == ballot_input("Reschedule the cleaning", [])
    (changed,) = calls.named("watchdog_goal_changed")
    assert changed == {
        "event": "watchdog_goal_changed",
        "dropped_reminders": 2,
        "dropped_ballot": True,
    }


def test_settle_drops_the_reminder_and_suppresses_the_finding_for_three_requests() -> None:
    async def main() -> tuple[list[str], list[Verdict]]:
        calls = _Calls()
        wd = _watchdog(calls, CALM, oracle=_oracle(**{Q_UNVERIFIED: 0.9}))
        _requests(wd, calls, 1, 3)
        await wd.wait()
        wd.settle(Q_UNVERIFIED)
        dropped = wd.reminders()
        _requests(wd, calls, 4, 3)  # ballot at request 6: within the next 3
        await wd.wait()
        _requests(wd, calls, 7, 3)  # ballot at request 9: reported again
        await wd.wait()
        return dropped, wd.verdicts

    dropped, verdicts = _run(main)
    assert dropped == []
    assert [[f.id for f in v.act] for v in verdicts] == [[Q_UNVERIFIED], [], [Q_UNVERIFIED]]


def test_aclose_cancels_a_running_ballot_and_nothing_arrives_after() -> None:
    async def main() -> tuple[_Calls, int, Watchdog, ScriptedDecisionModel]:
        calls = _Calls()
        oracle = _oracle(delay=1.0, **{Q_LOOPING: 0.9})
        wd = _watchdog(calls, LOOPING, oracle=oracle)
        _requests(wd, calls, 1, 3)
        await asyncio.sleep(0.5)
        await wd.aclose()
        logged = len(calls.events)
        _requests(wd, calls, 4, 6)
        await asyncio.sleep(10)
        with pytest.raises(RuntimeError, match="closed"):
            await wd.ballot()
        return calls, logged, wd, oracle

    calls, logged, wd, oracle = _run(main)
    assert oracle.cancelled == 1 and len(oracle.inputs) == 1
    assert len(calls.events) == logged
    assert calls.named("watchdog_verdict") == [] and calls.interrupts == []
    assert wd.verdicts == [] and wd.reminders() == []


def test_invalid_settings_name_what_was_expected() -> None:
    with pytest.raises(ValueError, match="off, shadow or on"):
        Watchdog(mode="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every"):
        Watchdog(every=0)
    with pytest.raises(ValueError, match="caller, agent or tool"):
        Watchdog().observe("narrator", "Once upon a time")
