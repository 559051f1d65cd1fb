"""Built-in response guardrails, registered by name in :data:`BUILTIN_TYPES`.

Each validates its ``config`` in the constructor (raising
:class:`~guardrails.response.GuardrailConfigError`) and keeps no mutable state after
that, so one instance is safely shared by every concurrent call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from livekit.agents import llm

from guardrails.response import (
    AgentResponseGuardrail,
    Allow,
    CallContext,
    Deny,
    Fail,
    GuardrailConfigError,
    GuardrailContext,
    ResponseDecision,
)

__all__ = [
    "BUILTIN_TYPES",
    "BlockedPhrasesGuardrail",
    "DecisionResponseGuardrail",
    "MaxLengthGuardrail",
]


def _check_keys(config: Mapping[str, Any], allowed: Sequence[str]) -> None:
    for key in config:
        if key not in allowed:
            raise GuardrailConfigError(str(key), f"unknown key (expected {', '.join(allowed)})")


class MaxLengthGuardrail(AgentResponseGuardrail):
    """Denies replies longer than ``config.max_chars`` characters.

    Args:
        context: ``config``: ``max_chars`` (int > 0).
    """

    def __init__(self, context: GuardrailContext) -> None:
        config = context.config
        _check_keys(config, ["max_chars"])
        max_chars = config.get("max_chars")
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars <= 0:
            raise GuardrailConfigError("max_chars", f"expected an integer > 0, got {max_chars!r}")
        self._max_chars = max_chars

    def decide(self, ctx: CallContext) -> ResponseDecision:
        """Deny a reply longer than ``max_chars``.

        Args:
            ctx: The reply and its call.

        Returns:
            Allow or Deny.
        """
        if len(ctx.reply) > self._max_chars:
            return Deny(f"reply has {len(ctx.reply)} characters (max {self._max_chars})")
        return Allow()


class BlockedPhrasesGuardrail(AgentResponseGuardrail):
    """Denies replies containing a blocked phrase or matching a blocked pattern.

    Phrases match case-insensitively as whole words or phrases (any run of whitespace
    between words). Patterns are regular expressions, searched as written. The reason
    names the index of what matched, never the reply text.

    Args:
        context: ``config``: ``phrases`` (list of strings) and/or ``patterns`` (list of
            regular expressions); at least one entry in total.
    """

    def __init__(self, context: GuardrailContext) -> None:
        config = context.config
        _check_keys(config, ["phrases", "patterns"])
        rules: list[tuple[str, re.Pattern[str]]] = []
        for j, phrase in enumerate(_strings(config, "phrases")):
            words = phrase.split()
            if not words:
                raise GuardrailConfigError(f"phrases[{j}]", "expected a non-empty phrase")
            body = r"\s+".join(re.escape(word) for word in words)
            rules.append((f"phrases[{j}]", re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)))
        for j, pattern in enumerate(_strings(config, "patterns")):
            try:
                rules.append((f"patterns[{j}]", re.compile(pattern)))
            except re.error as exc:
                raise GuardrailConfigError(
                    f"patterns[{j}]", f"invalid regular expression ({exc})"
                ) from None
        if not rules:
            raise GuardrailConfigError("phrases", "expected at least one phrase or pattern")
        self._rules = tuple(rules)

    def decide(self, ctx: CallContext) -> ResponseDecision:
        """Deny a reply in which any phrase or pattern matches.

        Args:
            ctx: The reply and its call.

        Returns:
            Allow or Deny.
        """
        for label, rule in self._rules:
            if rule.search(ctx.reply):
                return Deny(f"matched {label}")
        return Allow()


def _strings(config: Mapping[str, Any], key: str) -> list[str]:
    value = config.get(key, [])
    if isinstance(value, str) or not isinstance(value, list):
        raise GuardrailConfigError(key, f"expected a list of strings, got {type(value).__name__}")
    for j, item in enumerate(value):
        if not isinstance(item, str):
            raise GuardrailConfigError(
                f"{key}[{j}]", f"expected a string, got {type(item).__name__}"
            )
    return value


class DecisionResponseGuardrail(AgentResponseGuardrail):
    """Asks a decision model about the reply; denies when any probability is high.

    The model is built once, from ``config.model``, by the decision-model factory given
    to :meth:`~guardrails.response.ResponseGuardrails.build`, and shared by every call.
    A decision at or above ``threshold`` denies the reply, even if another decision
    came back without a result; otherwise a missing result is no verdict.

    Args:
        context: ``config``: ``model`` (model string), ``decisions`` (name -> prompt,
            each evaluated as an ``llm.Probability``), ``threshold`` (0..1, default 0.5).
    """

    def __init__(self, context: GuardrailContext) -> None:
        config = context.config
        _check_keys(config, ["model", "decisions", "threshold"])
        decisions = config.get("decisions")
        if not isinstance(decisions, Mapping) or not decisions:
            raise GuardrailConfigError(
                "decisions", "expected a non-empty mapping of decision name -> prompt"
            )
        for name, prompt in decisions.items():
            if not isinstance(name, str) or not name:
                raise GuardrailConfigError("decisions", f"expected non-empty names, got {name!r}")
            if not isinstance(prompt, str) or not prompt.strip():
                raise GuardrailConfigError(f"decisions.{name}", "expected a non-empty prompt")
        threshold = config.get("threshold", 0.5)
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not math.isfinite(threshold)
            or not 0 <= threshold <= 1
        ):
            raise GuardrailConfigError(
                "threshold", f"expected a number between 0 and 1, got {threshold!r}"
            )
        model = config.get("model")
        if not isinstance(model, str) or not model:
            raise GuardrailConfigError("model", f"expected a model string, got {model!r}")
        if context.decision_model is None:
            raise GuardrailConfigError(
                "model", f"cannot build {model!r}: no decision-model factory was given"
            )
        try:
            decision_model = context.decision_model(model)
        except Exception as exc:
            detail = " ".join(str(exc).split())
            raise GuardrailConfigError(
                "model", f"cannot build {model!r} ({type(exc).__name__}: {detail})"
            ) from None
        if "probability" not in decision_model.capabilities.decision_kinds:
            raise GuardrailConfigError("model", f"{model!r} cannot evaluate probability decisions")
        self._model = decision_model
        self._decisions: dict[str, llm.Decision] = {
            name: llm.Probability(prompt) for name, prompt in decisions.items()
        }
        self._threshold = float(threshold)

    def decide(self, ctx: CallContext) -> ResponseDecision:
        """Not used: :meth:`decide_async` is the implementation."""
        raise NotImplementedError("DecisionResponseGuardrail decides in decide_async")

    async def decide_async(self, ctx: CallContext) -> ResponseDecision:
        """Evaluate the reply text with the decision model.

        Args:
            ctx: The reply and its call.

        Returns:
            Deny when any decision is at or above the threshold; Fail when a decision
            has no result; otherwise Allow.
        """
        response = await self._model.evaluate(input=ctx.reply, decisions=self._decisions)
        missing: list[str] = []
        for name in self._decisions:
            result = response.results.get(name)
            if not isinstance(result, llm.ProbabilityResult):
                missing.append(name)
            elif result.value >= self._threshold:
                return Deny(f"decision {name!r} = {result.value:.2f} >= {self._threshold:g}")
        if missing:
            return Fail(f"no result for decision {', '.join(repr(n) for n in missing)}")
        return Allow()

    async def aclose(self) -> None:
        """Close the decision model."""
        await self._model.aclose()


BUILTIN_TYPES: dict[str, type[AgentResponseGuardrail]] = {
    "max_length": MaxLengthGuardrail,
    "blocked_phrases": BlockedPhrasesGuardrail,
    "decision": DecisionResponseGuardrail,
}
