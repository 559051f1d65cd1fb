"""A decision model with a deadline and a fallback: :func:`guarded`.

The primary (say an LLM) gets ``timeout`` seconds and no retries. If it times out or
fails, the fallback (say rules) evaluates every decision it can; decisions the primary
answered with an error are re-asked to the fallback (only those). Every result says who
answered it in ``provider_data["answered_by"]`` (``"primary"`` or ``"fallback"``), and a
fallback answer says why in ``provider_data["fallback_reason"]`` (``"timeout"``,
``"error: <ExceptionType>"`` or ``"decision error"``). Decisions of a kind the fallback
cannot evaluate stay errors.

The guarded model's own ``evaluate()`` still applies its ``conn_options`` around the
whole thing (primary plus fallback): give it a timeout longer than ``timeout`` plus the
fallback's time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from livekit.agents import APITimeoutError, llm
from livekit.agents.llm import DecisionResponse
from livekit.agents.types import APIConnectOptions

__all__ = ["GuardedDecisionModel", "guarded"]

logger = logging.getLogger(__name__)


def _kind(decision: llm.Decision) -> llm.DecisionKind:
    if isinstance(decision, llm.Probability):
        return "probability"
    if isinstance(decision, llm.Choice):
        return "choice"
    return "score"


def _tag(result: llm.DecisionResult, **data: str) -> llm.DecisionResult:
    return result.model_copy(update={"provider_data": {**result.provider_data, **data}})


class GuardedDecisionModel(llm.DecisionModel):
    """``primary`` bounded by ``timeout``, with ``fallback`` for whatever it does not answer.

    Capabilities are the primary's. Both models are shared, not owned: :meth:`aclose`
    closes neither.
    """

    def __init__(
        self, primary: llm.DecisionModel, fallback: llm.DecisionModel, *, timeout: float
    ) -> None:
        """Combine two decision models.

        Args:
            primary: Asked first, with ``timeout`` seconds and no retries.
            fallback: Asked for the decisions the primary did not answer.
            timeout: Seconds the primary may take.

        Raises:
            ValueError: ``timeout`` is not positive.
        """
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        super().__init__(capabilities=primary.capabilities)
        self._primary = primary
        self._fallback = fallback
        self._timeout = timeout

    @property
    def primary(self) -> llm.DecisionModel:
        """The model asked first."""
        return self._primary

    @property
    def fallback(self) -> llm.DecisionModel:
        """The model asked for what the primary did not answer."""
        return self._fallback

    @property
    def timeout(self) -> float:
        """Seconds the primary may take."""
        return self._timeout

    @property
    def model(self) -> str:
        """``guarded(<primary model>|<fallback model>)``."""
        return f"guarded({self._primary.model}|{self._fallback.model})"

    @property
    def provider(self) -> str:
        """``guarded(<primary provider>|<fallback provider>)``."""
        return f"guarded({self._primary.provider}|{self._fallback.provider})"

    async def _evaluate_impl(
        self,
        *,
        input: str,
        decisions: Mapping[str, llm.Decision],
        conn_options: APIConnectOptions,
    ) -> DecisionResponse:
        results: dict[str, llm.DecisionResult] = {}
        errors: dict[str, str] = {}
        retry: dict[str, str] = {}  # decision name -> fallback reason
        primary: DecisionResponse | None = None
        try:
            primary = await asyncio.wait_for(
                self._primary.evaluate(
                    input=input,
                    decisions=decisions,
                    conn_options=APIConnectOptions(max_retry=0, timeout=self._timeout),
                ),
                self._timeout,
            )
        except (TimeoutError, APITimeoutError):
            retry = dict.fromkeys(decisions, "timeout")
        except Exception as exc:
            retry = dict.fromkeys(decisions, f"error: {type(exc).__name__}")
        if primary is not None:
            for name, result in primary.results.items():
                results[name] = _tag(result, answered_by="primary")
            errors.update(primary.errors)
            retry = dict.fromkeys(primary.errors, "decision error")
        if retry:
            logger.debug(
                "decision fallback",
                extra={"decisions": sorted(retry), "reason": sorted(set(retry.values()))},
            )

        kinds = set(self._fallback.capabilities.decision_kinds)
        asked = {n: decisions[n] for n in retry if _kind(decisions[n]) in kinds}
        for name in retry.keys() - asked.keys():
            reason = retry[name]
            if reason != "decision error":  # the primary gave no message of its own
                errors[name] = (
                    f"primary failed ({reason}); the fallback cannot evaluate "
                    f"{_kind(decisions[name])} decisions"
                )
        answer: DecisionResponse | None = None
        if asked:
            try:
                answer = await self._fallback.evaluate(
                    input=input, decisions=asked, conn_options=conn_options
                )
            except Exception as exc:
                if primary is None:
                    raise  # nothing answered at all: the request failed
                for name in asked:
                    errors[name] = f"fallback error: {type(exc).__name__}"
            else:
                for name, result in answer.results.items():
                    errors.pop(name, None)
                    results[name] = _tag(
                        result, answered_by="fallback", fallback_reason=retry[name]
                    )
                for name, message in answer.errors.items():
                    errors[name] = f"fallback: {message}"

        answered = [r for r in (primary, answer) if r is not None]
        return DecisionResponse(
            results=results,
            errors=errors,
            model=self.model,
            provider=self.provider,
            request_id=next((r.request_id for r in answered if r.request_id), ""),
            input_tokens=_total(r.input_tokens for r in answered),
            output_tokens=_total(r.output_tokens for r in answered),
        )

    async def aclose(self) -> None:
        """Close nothing: the primary and the fallback are shared with their owners."""


def _total(counts: Iterable[int | None]) -> int | None:
    """The sum of the known counts, ``None`` if none is known."""
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def guarded(
    primary: llm.DecisionModel, fallback: llm.DecisionModel, timeout: float
) -> GuardedDecisionModel:
    """``primary`` bounded by ``timeout`` seconds, ``fallback`` for what it does not answer.

    Args:
        primary: Asked first, with ``timeout`` seconds and no retries.
        fallback: Evaluates everything (that its capabilities allow) when the primary
            times out or raises, and re-answers the decisions the primary returned as
            errors.
        timeout: Seconds the primary may take.

    Returns:
        A :class:`GuardedDecisionModel` with the primary's capabilities; closing it
        closes neither model.
    """
    return GuardedDecisionModel(primary, fallback, timeout=timeout)
