"""Guardrail checks declared in YAML: decisions, conditions, rules, setup, validation."""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import llm
from pydantic import ValidationError

from agent.app.config import AgentConfig, ConfigError, load_config
from agent.core import clock
from guardrails.config import CheckConfig, Condition, GuardrailsConfig, install_checks
from guardrails.decision import Block, DecisionEvaluated, DecisionGuardrail, Steer
from tests.fakes.models import ScriptedDecisionModel


def _ev(**values: Any) -> DecisionEvaluated:
    results: dict[str, Any] = {}
    for name, v in values.items():
        results[name] = (
            llm.ChoiceResult(value=v) if isinstance(v, str) else llm.ProbabilityResult(value=v)
        )
    return DecisionEvaluated(hook="on_user_turn", input="x", results=results, errors={}, latency=0)


def test_conditions_compare_numbers_and_choices() -> None:
    assert Condition.parse("abusive >= 0.8").holds(_ev(abusive=0.8))
    assert not Condition.parse("abusive > 0.8").holds(_ev(abusive=0.8))
    assert Condition.parse("topic == billing").holds(_ev(topic="billing"))
    assert Condition.parse("topic != 'billing'").holds(_ev(topic="other"))
    assert not Condition.parse("abusive >= 0.5").holds(_ev())  # no value, no match
    for bad in ["abusive", "abusive ~ 1", "topic > billing"]:
        with pytest.raises(ValueError):
            Condition.parse(bad)


def test_decisions_by_name_prompt_choice_and_score() -> None:
    check = CheckConfig.model_validate(
        {
            "hook": "on_user_turn",
            "decisions": {
                "abusive": None,
                "refund": "The caller wants a refund.",
                "topic": {"choice": "Topic?", "options": {"billing": "money", "other": "else"}},
                "mood": {"score": "Mood?", "levels": ["calm", "angry"]},
            },
        }
    )
    d = check.decision_map()
    assert isinstance(d["abusive"], llm.Probability) and "abusive" in d["abusive"].prompt
    assert d["refund"] == llm.Probability("The caller wants a refund.")
    assert isinstance(d["topic"], llm.Choice) and list(d["topic"].options) == ["billing", "other"]
    assert isinstance(d["mood"], llm.Score) and d["mood"].levels == ["calm", "angry"]


@pytest.mark.parametrize(
    ("check", "needle"),
    [
        ({"hook": "on_user_turn", "decisions": ["rude"]}, "needs a prompt"),
        ({"hook": "on_user_turn", "decisions": {"x": {"choice": "?", "options": {"a": "a"}}}}, "x"),
        (
            {
                "hook": "on_agent_sentence",
                "decisions": ["abusive"],
                "rules": [{"when": "abusive > 0.5", "action": "steer", "instructions": "x"}],
            },
            "only block or log",
        ),
        (
            {
                "hook": "on_agent_turn",
                "decisions": ["abusive"],
                "rules": [{"when": "abusive > 0.5", "action": "block"}],
            },
            "only observes",
        ),
        (
            {
                "hook": "on_user_turn",
                "decisions": ["abusive"],
                "rules": [{"when": "abusive > 0.5", "action": "steer"}],
            },
            "needs instructions",
        ),
    ],
)
def test_bad_checks_are_rejected_with_the_reason(check: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        CheckConfig.model_validate(check)


def test_rules_apply_in_order_and_min_count_counts_per_call() -> None:
    check = CheckConfig.model_validate(
        {
            "hook": "on_user_turn",
            "decisions": ["abusive", "prompt_injection"],
            "rules": [
                {"when": "abusive >= 0.7", "min_count": 2, "action": "block", "end_call": True},
                {"when": "abusive >= 0.7", "action": "block", "say": "keep it civil"},
                {"when": "prompt_injection >= 0.7", "action": "steer", "instructions": "no"},
            ],
        }
    )
    handler = check.handler()
    assert handler(_ev(abusive=0.1, prompt_injection=0.1)) is None
    assert handler(_ev(abusive=0.9, prompt_injection=0.9)) == Block(say="keep it civil")
    assert handler(_ev(abusive=0.1, prompt_injection=0.9)) == Steer("no")
    assert handler(_ev(abusive=0.9)) == Block(end_call=True)
    # a new handler (a new call) counts from zero
    assert check.handler()(_ev(abusive=0.9)) == Block(say="keep it civil")


def setup_for_test(guardrail: DecisionGuardrail) -> None:
    """A ``guardrails.setup`` function: adds a Python handler."""

    @guardrail.on_agent_turn(decisions={"polite": llm.Probability("The agent is polite.")})
    def observe(ev: DecisionEvaluated) -> None:
        return None


def test_install_checks_registers_yaml_checks_and_the_python_setup() -> None:
    config = GuardrailsConfig.model_validate(
        {
            "setup": "tests.unit.test_guardrail_config:setup_for_test",
            "checks": [
                {
                    "hook": "on_user_turn",
                    "decisions": ["abusive"],
                    "on_error": "block",
                    "error_say": "Sorry, one moment.",
                    "rules": [{"when": "abusive >= 0.7", "action": "block", "say": "stop"}],
                }
            ],
        }
    )

    class Slot:
        guardrail: Any = None

    async def main() -> tuple[Any, Any]:
        g = DecisionGuardrail(Slot(), model=ScriptedDecisionModel(fail=RuntimeError("down")))
        install_checks(g, config)
        assert g.has_checks("on_agent_turn") and not g.has_checks("on_agent_sentence")
        return await g.run("on_user_turn", "hi"), await g.run("on_agent_turn", "Hello.")

    failed, observed = clock.run(main())
    assert failed.action == "block" and failed.say == "Sorry, one moment."
    assert observed.action == "allow"


def test_agent_config_errors_name_the_guardrails_key(tmp_path: Any) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "guardrails:\n  response:\n    - {name: a, type: max_length, report_only: true}\n"
        "    - {name: a, type: max_length, report_only: true}\n"
    )
    with pytest.raises(ConfigError, match=r"guardrails: response\[1\].name: 'a' is used twice"):
        load_config(path)


def test_the_default_config_declares_the_four_builtin_checks() -> None:
    config = load_config()
    hooks = {(c.hook, *c.decisions) for c in config.guardrails.checks}
    assert hooks == {
        ("on_user_turn", "abusive"),
        ("on_user_turn", "prompt_injection"),
        ("on_user_turn", "human_handoff"),
        ("on_agent_sentence", "sensitive_data"),
    }
    # and without a guardrails section there are no checks
    assert AgentConfig().guardrails.enabled() is False
