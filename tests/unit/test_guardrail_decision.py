"""DecisionGuardrail: results, errors, timeouts, eager reuse, merging, one per session."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from livekit.agents import llm

from agent.core import clock
from guardrails.decision import (
    Block,
    DecisionEvaluated,
    DecisionGuardrail,
    GuardrailSlotError,
    Steer,
    transcript_input,
)
from tests.fakes.models import ScriptedDecisionModel

ABUSIVE = {"abusive": llm.Probability("The user is abusive.")}


class _Session:
    guardrail: Any = None


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    return clock.run(main())


def _contains(word: str, value: float = 0.9) -> Callable[[str, str], float]:
    return lambda text, name: value if word in text else 0.05


def test_handler_gets_every_kind_of_result_and_the_input() -> None:
    def answer(text: str, name: str) -> float | str:
        return {"abusive": 0.2, "topic": "billing", "mood": 2}[name]

    seen: list[DecisionEvaluated] = []

    async def main() -> Any:
        g = DecisionGuardrail(_Session(), model=ScriptedDecisionModel(answer, delay=0.05))

        @g.on_user_turn(
            decisions={
                "abusive": llm.Probability("abusive"),
                "topic": llm.Choice("topic", {"billing": "money", "other": "anything else"}),
                "mood": llm.Score("mood", ["angry", "neutral", "happy"]),
            }
        )
        def handler(ev: DecisionEvaluated) -> None:
            seen.append(ev)

        return await g.run("on_user_turn", "what do I owe you")

    outcome = _run(main)
    (ev,) = seen
    assert ev.value("abusive") == 0.2 and ev.value("topic") == "billing"
    assert ev.value("mood") == 2.0 and ev.value("missing", "d") == "d"
    assert ev.input == "what do I owe you" and ev.errors == {}
    assert ev.latency == pytest.approx(0.05, abs=0.01)
    assert outcome.action == "allow"
    assert outcome.values == {"abusive": 0.2, "topic": "billing", "mood": 2.0}


def test_first_block_wins_otherwise_every_steer_applies() -> None:
    async def main() -> tuple[Any, Any]:
        g = DecisionGuardrail(_Session(), model=ScriptedDecisionModel(_contains("idiot")))

        @g.on_user_turn(decisions=ABUSIVE)
        def steer_one(ev: DecisionEvaluated) -> Steer:
            return Steer("be brief")

        @g.on_user_turn(decisions=ABUSIVE)
        def block_first(ev: DecisionEvaluated) -> Block | None:
            return Block(say="first") if ev.value("abusive", 0) > 0.5 else None

        @g.on_user_turn(decisions=ABUSIVE)
        def block_second(ev: DecisionEvaluated) -> Block | Steer:
            return Block(say="second") if ev.value("abusive", 0) > 0.5 else Steer("be kind")

        return await g.run("on_user_turn", "you idiot"), await g.run("on_user_turn", "hi")

    blocked, steered = _run(main)
    assert blocked.action == "block" and blocked.say == "first"
    assert steered.action == "steer" and steered.instructions == "be brief\nbe kind"


@pytest.mark.parametrize(
    ("model", "handler_raises", "why"),
    [
        (ScriptedDecisionModel(fail=RuntimeError("down")), False, "error: "),
        (ScriptedDecisionModel(lambda t, n: None), False, "no result for abusive"),
        (ScriptedDecisionModel(), True, "error: ValueError"),
        (ScriptedDecisionModel(hang=True), False, "timeout"),
    ],
)
@pytest.mark.parametrize("on_error", ["allow", "block"])
def test_on_error_decides_what_a_failed_check_means(
    model: ScriptedDecisionModel, handler_raises: bool, why: str, on_error: str
) -> None:
    async def main() -> Any:
        g = DecisionGuardrail(_Session(), model=model, timeout=0.5)

        @g.on_user_turn(decisions=ABUSIVE, on_error=on_error, error_say="sorry")  # type: ignore[arg-type]
        def handler(ev: DecisionEvaluated) -> None:
            if handler_raises:
                raise ValueError("bad handler")

        return await g.run("on_user_turn", "hello")

    outcome = _run(main)
    assert outcome.action == ("block" if on_error == "block" else "allow")
    assert outcome.say == ("sorry" if on_error == "block" else None)
    (check,) = outcome.checks
    assert check.failed and check.errors["_check"].startswith(why)


def test_the_timeout_covers_evaluation_and_an_async_handler_together() -> None:
    async def main() -> Any:
        g = DecisionGuardrail(_Session(), model=ScriptedDecisionModel(delay=0.3))

        @g.on_agent_sentence(decisions=ABUSIVE, on_error="block", timeout=0.5)
        async def slow(ev: DecisionEvaluated) -> None:
            await asyncio.sleep(0.3)  # 0.3 + 0.3 > 0.5, though each alone fits

        @g.on_agent_sentence(decisions=ABUSIVE, on_error="block", timeout=0.7)
        async def fits(ev: DecisionEvaluated) -> None:
            await asyncio.sleep(0.3)

        return await g.run("on_agent_sentence", "Sure.")

    outcome = _run(main)
    slow, fits = outcome.checks
    assert slow.failed and slow.errors["_check"] == "timeout"
    assert not fits.failed
    assert outcome.action == "block"


def test_a_handler_result_the_hook_cannot_take_is_an_error() -> None:
    async def main() -> Any:
        g = DecisionGuardrail(_Session(), model=ScriptedDecisionModel())

        @g.on_agent_sentence(decisions=ABUSIVE, on_error="allow")
        def steer(ev: DecisionEvaluated) -> Steer:
            return Steer("no steering mid-reply")

        return await g.run("on_agent_sentence", "Hello there.")

    outcome = _run(main)
    assert outcome.action == "allow" and outcome.checks[0].failed


def test_eager_result_is_reused_only_for_exactly_the_same_input() -> None:
    model = ScriptedDecisionModel(delay=0.2)

    async def main() -> tuple[Any, Any]:
        g = DecisionGuardrail(_Session(), model=model)

        @g.on_user_turn(decisions=ABUSIVE)
        def handler(ev: DecisionEvaluated) -> None:
            return None

        g.prefetch("I want")
        await asyncio.sleep(0.05)
        g.prefetch("I want to cancel")  # cancels the request for "I want"
        await asyncio.sleep(0.3)
        assert g.eager_state("I want to cancel") == "ready"
        same = await g.run("on_user_turn", "I want to cancel")
        g.prefetch("my order")
        different = await g.run("on_user_turn", "my order please")
        return same, different

    same, different = _run(main)
    assert same.checks[0].reused is True and same.latency == 0.0
    assert different.checks[0].reused is False
    assert model.inputs == ["I want", "I want to cancel", "my order", "my order please"]
    assert model.cancelled == 2  # "I want", then "my order" when the turn differed


def test_eager_reuse_sees_history_the_model_would_see() -> None:
    model = ScriptedDecisionModel()

    async def main() -> Any:
        g = DecisionGuardrail(_Session(), model=model)

        @g.on_user_turn(decisions=ABUSIVE, history=2)
        def handler(ev: DecisionEvaluated) -> None:
            return None

        g.prefetch("yes", [("assistant", "Is that right?")])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        # the history changed (an edit): the eager result is not reused
        return await g.run("on_user_turn", "yes", [("assistant", "Shall I cancel?")])

    outcome = _run(main)
    assert outcome.checks[0].reused is False
    assert model.inputs[-1] == "assistant: Shall I cancel?\nuser: yes"


def test_one_guardrail_per_session_and_closing_frees_the_slot() -> None:
    async def main() -> None:
        session = _Session()
        g = DecisionGuardrail(session, model=ScriptedDecisionModel())
        assert session.guardrail is g
        with pytest.raises(GuardrailSlotError):
            DecisionGuardrail(session, model=ScriptedDecisionModel())
        await g.aclose()
        assert session.guardrail is None
        again = DecisionGuardrail(session, model=ScriptedDecisionModel())
        assert session.guardrail is again
        # a closed guardrail checks nothing
        assert (await g.run("on_user_turn", "x")).action == "allow"

    _run(main)


def test_closing_cancels_eager_requests_in_flight() -> None:
    model = ScriptedDecisionModel(hang=True)

    async def main() -> None:
        g = DecisionGuardrail(_Session(), model=model)
        g.on_user_turn(decisions=ABUSIVE)(lambda ev: None)
        g.prefetch("hello")
        await asyncio.sleep(0)
        await g.aclose()

    _run(main)
    assert model.cancelled == 1


def test_bad_registrations_fail_at_once() -> None:
    g = DecisionGuardrail(_Session(), model=ScriptedDecisionModel())
    with pytest.raises(ValueError, match="on_error"):
        g.on_user_turn(decisions=ABUSIVE, on_error="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one decision"):
        g.on_agent_turn(decisions={})
    with pytest.raises(TypeError, match="Probability, Choice or Score"):
        g.on_agent_turn(decisions={"x": "not a decision"})  # type: ignore[dict-item]


def test_transcript_input_uses_livekit_role_lines() -> None:
    history = [("user", "hi"), ("assistant", "Hello, how can I help?"), ("user", " ")]
    assert transcript_input(history, "cancel it", "user", 0) == "cancel it"
    assert transcript_input(history, "cancel it", "user", 3) == (
        "user: hi\nassistant: Hello, how can I help?\nuser: cancel it"
    )
