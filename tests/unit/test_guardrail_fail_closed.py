"""A guardrail that cannot answer: each pending check resolves by its own ``on_error``.

Regression for the hook that allowed on every error: a raising, a hanging and a
crashed (then restarted) guardrail actor, and a stopped one, each with a fail-open
and a fail-closed check, at each hook. A fail-closed sentence check means the
sentence is not spoken.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from agent.app.guarding import GuardrailHooks
from agent.core import Bus, CallScope, RestartBudget, run
from agent.core.messages import GuardrailCheck, GuardrailEvaluated, ResponseCheck, Say
from agent.session.agent import TurnVerdict
from guardrails.actor import GuardrailActor
from guardrails.config import GuardrailsConfig, install_checks
from guardrails.decision import DecisionGuardrail
from guardrails.response import ResponseGuardrails
from tests.fakes.models import ScriptedDecisionModel

CALL = "call_fail_closed"
HOOKS = ("on_user_turn", "on_agent_sentence", "on_agent_turn", "response")
FAULTS = ("raising", "hanging", "crashed", "stopped")


class Faulty(GuardrailActor):
    """A guardrail actor with one fault: its checks raise, hang, or it crashes mid-check."""

    def __init__(self, fault: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.fault = fault

    async def receive(self, msg: Any) -> Any:
        if isinstance(msg, Say):  # the crash trigger: a told message that fails
            raise RuntimeError("guardrail bug")
        if isinstance(msg, GuardrailCheck | ResponseCheck):
            match self.fault:
                case "raising":
                    raise RuntimeError("guardrail bug")
                case "hanging":
                    await asyncio.Event().wait()
                case "crashed":
                    self.checks += 1
                    return self._own(asyncio.Event().wait())
        return await super().receive(msg)


def _actor(fault: str, hook: str, on_error: str, bus: Bus) -> Faulty:
    if hook == "response":
        response = ResponseGuardrails.build(
            [
                {
                    "name": "length",
                    "type": "max_length",
                    "on_error": "deny" if on_error == "block" else "allow",
                    "replacement": "Let me put that differently.",
                    "config": {"max_chars": 500},
                }
            ]
        )
        return Faulty(fault, call_id=CALL, bus=bus, response=response, reply_mode="buffered")
    cfg = GuardrailsConfig.model_validate(
        {
            "timeout": 1.0,
            "checks": [
                {
                    "hook": hook,
                    "name": "check",
                    "decisions": ["sensitive_data"],
                    "on_error": on_error,
                    "error_say": "Sorry, I can't say that.",
                    "rules": [{"when": "sensitive_data >= 0.5", "action": "log"}],
                }
            ],
        }
    )
    decision = DecisionGuardrail(SimpleNamespace(guardrail=None), model=ScriptedDecisionModel())
    install_checks(decision, cfg)
    return Faulty(fault, call_id=CALL, bus=bus, guardrail=decision)


async def _call_hook(hooks: GuardrailHooks, hook: str) -> TurnVerdict | None:
    match hook:
        case "on_user_turn":
            return await hooks.on_user_turn("turn_1", "my card is 4111")
        case "on_agent_sentence":
            return await hooks.on_agent_sentence("run_1", 0, "Your PIN is 1234.")
        case "on_agent_turn":
            await hooks.on_agent_turn("run_1", "Your PIN is 1234.", False)
            return None
        case _:
            return await hooks.on_reply("run_1", "Your PIN is 1234.")


def _scenario(fault: str, hook: str, on_error: str) -> tuple[TurnVerdict | None, list[Any], float]:
    async def main() -> tuple[TurnVerdict | None, list[Any], float]:
        loop = asyncio.get_running_loop()
        bus = Bus(CALL)
        seen: list[Any] = []
        bus.subscribe("guardrail_evaluated", seen.append)
        actor = _actor(fault, hook, on_error, bus)
        hooks = GuardrailHooks(actor, CALL)
        async with CallScope(CALL, budget=RestartBudget(max_restarts=3)) as scope:
            scope.start_actor(actor)
            await asyncio.sleep(0)
            if fault == "stopped":
                actor.stop()
                await asyncio.sleep(0.1)
            if fault == "crashed":
                asked = asyncio.ensure_future(_call_hook(hooks, hook))
                await asyncio.sleep(0.2)
                await actor.tell(Say(call_id=CALL, text="crash"))
                verdict = await asked
            else:
                verdict = await _call_hook(hooks, hook)
            took = loop.time()
            await scope.shutdown()
        return verdict, seen, took

    return run(main())


@pytest.mark.parametrize("on_error", ["allow", "block"])
@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("fault", FAULTS)
def test_a_guardrail_that_cannot_answer_resolves_each_check_by_its_on_error(
    fault: str, hook: str, on_error: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.guardrails"):
        verdict, seen, took = _scenario(fault, hook, on_error)
    # bounded: never longer than the hook's own bound (the 2 s check timeout + 0.5 s)
    assert took <= 2.5 + 1e-6
    evaluated = [m for m in seen if isinstance(m, GuardrailEvaluated) and m.errors]
    assert evaluated, "the failure is published like any failed check"
    if hook == "on_agent_turn":
        assert verdict is None  # observe-only: nothing to stop
        return
    assert verdict is not None
    if on_error == "block":
        assert verdict.action == "block"
        expected = (
            "Let me put that differently." if hook == "response" else "Sorry, I can't say that."
        )
        assert verdict.say == expected
        assert evaluated[-1].action == "block"
    else:
        assert verdict.action == "allow"
    logged = [r for r in caplog.records if "did not answer" in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # with the traceback
