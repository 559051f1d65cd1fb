"""Response guardrails: decisions, no verdict vs deny, timeouts, binding, built-ins."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from livekit.agents import llm
from livekit.agents.types import APIConnectOptions

from guardrails.response import (
    AgentResponseGuardrail,
    Allow,
    CallContext,
    Deny,
    Fail,
    GuardrailContext,
    ResponseDecision,
    ResponseGuardrailError,
    ResponseGuardrails,
    ResponseGuardrailSpec,
    ResponseVerdict,
)

HERE = "tests.unit.test_response_guardrails"


def ctx(reply: str = "Hello, how can I help?", call_id: str = "call-1") -> CallContext:
    return CallContext(call_id=call_id, agent_name="sam", reply=reply, user_text="hi", history=())


class ScriptedGuardrail(AgentResponseGuardrail):
    """Returns (or raises) what ``config.result`` names."""

    def __init__(self, context: GuardrailContext) -> None:
        self.result = context.config.get("result", "allow")

    def decide(self, ctx: CallContext) -> ResponseDecision:
        match self.result:
            case "deny":
                return Deny("scripted deny", replacement="Sorry, I can't say that.")
            case "deny-plain":
                return Deny("scripted deny")
            case "fail":
                return Fail("backend down")
            case "raise":
                raise RuntimeError(f"boom while reading {ctx.reply}")
            case "none":
                return None  # type: ignore[return-value]
        return Allow()


class AsyncGuardrail(AgentResponseGuardrail):
    """Overrides decide_async; decide must never be used."""

    def __init__(self, context: GuardrailContext) -> None:
        self.result = context.config.get("result", "deny")

    def decide(self, ctx: CallContext) -> ResponseDecision:
        raise AssertionError("decide is not used when decide_async is overridden")

    async def decide_async(self, ctx: CallContext) -> ResponseDecision:
        await asyncio.sleep(0)
        if self.result == "raise":
            raise ValueError("async failure")
        if self.result == "failed-future":
            future: asyncio.Future[ResponseDecision] = asyncio.get_running_loop().create_future()
            future.set_exception(ConnectionError("lost"))
            return await future
        return Deny("async deny") if self.result == "deny" else Allow()


class NeverAnswers(AgentResponseGuardrail):
    """Waits on an event nobody sets, so only the timeout ends it."""

    def decide(self, ctx: CallContext) -> ResponseDecision:
        raise NotImplementedError

    async def decide_async(self, ctx: CallContext) -> ResponseDecision:
        await asyncio.Event().wait()
        return Allow()


class NoArgs(AgentResponseGuardrail):
    """A constructor without arguments."""

    def decide(self, ctx: CallContext) -> ResponseDecision:
        return Deny("no-args deny")


class NotAGuardrail:
    def decide(self, ctx: CallContext) -> ResponseDecision:
        return Allow()


class ImplementsNothing(AgentResponseGuardrail):
    pass


class BrokenConstructor(AgentResponseGuardrail):
    def __init__(self, context: GuardrailContext) -> None:
        raise ValueError("missing\nsecret file")

    def decide(self, ctx: CallContext) -> ResponseDecision:
        return Allow()


class DenyOwnWord(AgentResponseGuardrail):
    """Denies a reply containing ``stop-<call_id>``; blocks its thread a little to interleave."""

    constructed = 0
    lock = threading.Lock()
    seen_instances: set[int] = set()
    threads: set[int] = set()

    def __init__(self) -> None:
        with DenyOwnWord.lock:
            DenyOwnWord.constructed += 1

    def decide(self, ctx: CallContext) -> ResponseDecision:
        word = f"stop-{ctx.call_id}"
        time.sleep(0.001)  # let other threads run between reading ctx and deciding
        with DenyOwnWord.lock:
            DenyOwnWord.seen_instances.add(id(self))
            DenyOwnWord.threads.add(threading.get_ident())
        if word in ctx.reply.split():
            return Deny(
                f"{ctx.call_id} said its word", replacement=f"replacement for {ctx.call_id}"
            )
        return Allow()


def spec(name: str, result: str = "allow", **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": f"{HERE}:ScriptedGuardrail", "config": {"result": result}, **kw}


async def check_one(entry: Mapping[str, Any], reply: str = "Hello.") -> ResponseVerdict:
    guardrails = ResponseGuardrails.build([entry])
    [verdict] = await guardrails.check(ctx(reply))
    return verdict


# -- decisions ---------------------------------------------------------------------------------


async def test_allow() -> None:
    verdict = await check_one(spec("a", "allow"))
    assert (verdict.name, verdict.outcome, verdict.error) == ("a", "allow", None)
    assert verdict.enforced and not verdict.blocks
    assert verdict.latency >= 0


async def test_deny_uses_the_guardrails_replacement_then_the_specs() -> None:
    verdict = await check_one(spec("d", "deny", replacement="configured"))
    assert verdict.outcome == "deny" and verdict.blocks
    assert verdict.reason == "scripted deny"
    assert verdict.replacement == "Sorry, I can't say that."
    verdict = await check_one(spec("d", "deny-plain", replacement="configured"))
    assert verdict.replacement == "configured"


@pytest.mark.parametrize("result", ["fail", "raise", "none"])
async def test_fail_raise_and_invalid_result_are_no_verdict_not_deny(result: str) -> None:
    allowing = await check_one(spec("x", result))
    assert allowing.outcome == "no_verdict"
    assert not allowing.blocks  # on_error defaults to allow
    denying = await check_one(spec("x", result, on_error="deny", replacement="One moment."))
    assert denying.outcome == "no_verdict"
    assert denying.blocks and denying.replacement == "One moment."


async def test_no_verdict_errors_never_quote_the_reply() -> None:
    raised = await check_one(spec("x", "raise"), reply="my card is 4111")
    assert raised.error == "RuntimeError"
    assert "4111" not in raised.reason
    failed = await check_one(spec("x", "fail"))
    assert failed.error == "backend down"


async def test_async_override_is_used_instead_of_decide() -> None:
    entry = {"name": "async", "type": f"{HERE}:AsyncGuardrail"}
    verdict = await check_one(entry)
    assert (verdict.outcome, verdict.reason) == ("deny", "async deny")


@pytest.mark.parametrize(
    ("result", "error"), [("raise", "ValueError"), ("failed-future", "ConnectionError")]
)
async def test_async_failures_are_no_verdict(result: str, error: str) -> None:
    entry = {"name": "async", "type": f"{HERE}:AsyncGuardrail", "config": {"result": result}}
    verdict = await check_one(entry)
    assert (verdict.outcome, verdict.error) == ("no_verdict", error)
    assert not verdict.blocks


async def test_timeout_is_no_verdict_handled_by_on_error() -> None:
    entry = {"name": "slow", "type": f"{HERE}:NeverAnswers", "timeout": 0.05}
    verdict = await check_one(entry)
    assert (verdict.outcome, verdict.error) == ("no_verdict", "timeout")
    assert not verdict.blocks
    assert verdict.latency >= 0.05
    verdict = await check_one({**entry, "on_error": "deny"})
    assert verdict.blocks


async def test_cancelling_a_check_cancels_it_rather_than_reporting_no_verdict() -> None:
    entry = {"name": "slow", "type": f"{HERE}:NeverAnswers", "timeout": 30.0}
    guardrails = ResponseGuardrails.build([entry])
    task = asyncio.create_task(guardrails.check(ctx()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class SlowDeny(AgentResponseGuardrail):
    """Blocks its worker thread for a while, then denies."""

    def decide(self, ctx: CallContext) -> ResponseDecision:
        time.sleep(0.05)
        return Deny("slow deny")


def test_virtual_clock_waits_for_decide_and_jumps_to_timeouts() -> None:
    from agent.core.clock import run

    async def main() -> list[ResponseVerdict]:
        guardrails = ResponseGuardrails.build(
            [
                # virtual time stands still while decide runs in the executor
                {"name": "slow", "type": f"{HERE}:SlowDeny", "timeout": 0.01},
                # and jumps straight to a timeout when nothing else is running
                {"name": "never", "type": f"{HERE}:NeverAnswers", "timeout": 60.0},
            ]
        )
        return await guardrails.check(ctx())

    slow, never = run(main())
    assert slow.outcome == "deny" and slow.latency < 0.01
    assert (never.outcome, never.error) == ("no_verdict", "timeout")
    assert never.latency == pytest.approx(60.0)


async def test_a_slow_guardrail_does_not_hold_up_the_others_verdicts() -> None:
    guardrails = ResponseGuardrails.build(
        [
            {"name": "slow", "type": f"{HERE}:NeverAnswers", "timeout": 0.05},
            spec("deny", "deny"),
            {"name": "no-args", "type": f"{HERE}:NoArgs", "report_only": True},
        ]
    )
    verdicts = await guardrails.check(ctx())
    assert [v.name for v in verdicts] == ["slow", "deny", "no-args"] == list(guardrails.names)
    assert [v.outcome for v in verdicts] == ["no_verdict", "deny", "deny"]
    assert len(guardrails) == 3


async def test_report_only_never_blocks_but_is_reported() -> None:
    for result in ("deny", "raise"):
        verdict = await check_one(spec("r", result, report_only=True, on_error="deny"))
        assert not verdict.enforced and not verdict.blocks
        assert verdict.outcome in ("deny", "no_verdict")
    guardrails = ResponseGuardrails.build([spec("r", "deny", report_only=True)])
    verdicts = await guardrails.check(ctx())
    assert ResponseGuardrails.combine(verdicts) == (False, None)
    assert verdicts[0].outcome == "deny"


# -- combine -----------------------------------------------------------------------------------


def verdict(
    outcome: str, *, enforced: bool = True, on_error: str = "allow", replacement: str | None = None
) -> ResponseVerdict:
    return ResponseVerdict(
        name=outcome,
        outcome=outcome,  # type: ignore[arg-type]
        reason="",
        replacement=replacement,
        enforced=enforced,
        latency=0.0,
        on_error=on_error,  # type: ignore[arg-type]
    )


def test_combine() -> None:
    combine = ResponseGuardrails.combine
    assert combine([]) == (False, None)
    assert combine([verdict("allow"), verdict("no_verdict")]) == (False, None)
    assert combine([verdict("deny", enforced=False, replacement="x")]) == (False, None)
    assert combine([verdict("allow"), verdict("deny"), verdict("deny", replacement="b")]) == (
        True,
        None,
    )
    assert combine(
        [verdict("no_verdict", on_error="deny", replacement="a"), verdict("deny", replacement="b")]
    ) == (True, "a")


# -- binding -----------------------------------------------------------------------------------


def test_check_binding() -> None:
    guardrails = ResponseGuardrails.build([spec("report", report_only=True), spec("no-cards")])
    guardrails.check_binding(streamed=False)
    with pytest.raises(ResponseGuardrailError) as error:
        guardrails.check_binding(streamed=True)
    assert str(error.value) == (
        "guardrails.response[1] (no-cards): an enforcing response guardrail cannot check a "
        "streamed reply; set report_only: true or reply_mode: buffered"
    )
    ResponseGuardrails.build([spec("report", report_only=True)]).check_binding(streamed=True)


# -- build errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [spec("a"), {"name": "b", "type": "nonexistent_pkg_xyz.mod:Cls"}],
            "guardrails.response[1].type: cannot import 'nonexistent_pkg_xyz.mod:Cls' "
            "(No module named 'nonexistent_pkg_xyz')",
        ),
        (
            [{"name": "b", "type": f"{HERE}:Missing"}],
            f"guardrails.response[0].type: cannot import '{HERE}:Missing' "
            f"(module '{HERE}' has no attribute 'Missing')",
        ),
        (
            [{"name": "b", "type": f"{HERE}:NotAGuardrail"}],
            f"guardrails.response[0].type: '{HERE}:NotAGuardrail' is not a subclass of "
            "AgentResponseGuardrail",
        ),
        (
            [{"name": "b", "type": f"{HERE}:ImplementsNothing"}],
            f"guardrails.response[0].type: '{HERE}:ImplementsNothing' is abstract (implement "
            "decide, or override decide_async and let decide raise NotImplementedError)",
        ),
        (
            [{"name": "b", "type": "shouting"}],
            "guardrails.response[0].type: unknown type 'shouting' (expected one of "
            "blocked_phrases, decision, max_length or 'package.module:ClassName')",
        ),
        (
            [spec("a"), spec("b"), spec("a")],
            "guardrails.response[2].name: duplicate name 'a' (already used by "
            "guardrails.response[0])",
        ),
        (
            [{"name": "b", "type": f"{HERE}:BrokenConstructor"}],
            f"guardrails.response[0] (b): '{HERE}:BrokenConstructor' failed to start "
            "(ValueError: missing secret file)",
        ),
        (
            [{"name": "b", "type": "max_length", "config": {"max_chars": 0}}],
            "guardrails.response[0].config.max_chars: expected an integer > 0, got 0",
        ),
        (
            [{"name": "b", "type": "max_length", "config": {"max_chars": 5, "min": 1}}],
            "guardrails.response[0].config.min: unknown key (expected max_chars)",
        ),
        (
            [{"name": "b", "type": "blocked_phrases", "config": {"phrases": "card"}}],
            "guardrails.response[0].config.phrases: expected a list of strings, got str",
        ),
        (
            [{"name": "b", "type": "blocked_phrases", "config": {"patterns": ["ok", "(x"]}}],
            "guardrails.response[0].config.patterns[1]: invalid regular expression "
            "(missing ), unterminated subpattern at position 0)",
        ),
        (
            [{"name": "b", "type": "blocked_phrases"}],
            "guardrails.response[0].config.phrases: expected at least one phrase or pattern",
        ),
        (
            [{"name": "b", "type": "decision", "config": {"model": "m", "decisions": {"x": "y"}}}],
            "guardrails.response[0].config.model: cannot build 'm': no decision-model factory "
            "was given",
        ),
        (
            [{"name": "b", "type": "max_length", "timeout": 0}],
            "guardrails.response[0].timeout: Input should be greater than 0",
        ),
        (
            [{"name": "b", "type": "max_length", "on_eror": "deny"}],
            "guardrails.response[0].on_eror: Extra inputs are not permitted",
        ),
        (
            [{"type": "max_length"}],
            "guardrails.response[0].name: Field required",
        ),
    ],
)
def test_build_errors_name_the_key(entries: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ResponseGuardrailError) as error:
        ResponseGuardrails.build(entries)
    assert str(error.value) == message


def test_build_accepts_specs_and_a_custom_key() -> None:
    built = ResponseGuardrails.build([ResponseGuardrailSpec(name="n", type=f"{HERE}:NoArgs")])
    assert built.names == ("n",)
    with pytest.raises(ResponseGuardrailError, match=r"^agents\.sam\.response\[1\]\.name: dup"):
        ResponseGuardrails.build([spec("a"), spec("a")], key="agents.sam.response")
    with pytest.raises(ResponseGuardrailError, match="expected a list of guardrail entries"):
        ResponseGuardrails.build({"name": "a"})  # type: ignore[arg-type]


# -- built-ins ---------------------------------------------------------------------------------


async def test_max_length() -> None:
    entry = {"name": "short", "type": "max_length", "config": {"max_chars": 10}}
    assert (await check_one(entry, "0123456789")).outcome == "allow"
    denied = await check_one(entry, "0123456789!")
    assert (denied.outcome, denied.reason) == ("deny", "reply has 11 characters (max 10)")


@pytest.mark.parametrize(
    ("reply", "outcome", "reason"),
    [
        ("Your CARD  Number is safe.", "deny", "matched phrases[1]"),
        ("We discard numbers daily.", "allow", "allowed"),
        ("That is guaranteed.", "deny", "matched phrases[0]"),
        ("Call 555-1234 now.", "deny", "matched patterns[0]"),
        ("Call us now.", "allow", "allowed"),
    ],
)
async def test_blocked_phrases(reply: str, outcome: str, reason: str) -> None:
    entry = {
        "name": "phrases",
        "type": "blocked_phrases",
        "config": {"phrases": ["guaranteed", "card number"], "patterns": [r"\d{3}-\d{4}"]},
    }
    verdict = await check_one(entry, reply)
    assert (verdict.outcome, verdict.reason) == (outcome, reason)


class FakeDecisionModel(llm.DecisionModel):
    """Scores each decision by a fixed table; names left out of the table get no result."""

    def __init__(self, scores: dict[str, float]) -> None:
        super().__init__(capabilities=llm.DecisionCapabilities(decision_kinds=["probability"]))
        self.scores = scores
        self.inputs: list[str] = []
        self.closed = False

    async def _evaluate_impl(
        self, *, input: str, decisions: Mapping[str, llm.Decision], conn_options: APIConnectOptions
    ) -> llm.DecisionResponse:
        self.inputs.append(input)
        results: dict[str, Any] = {
            name: llm.ProbabilityResult(value=self.scores[name])
            for name in decisions
            if name in self.scores
        }
        return llm.DecisionResponse(results=results)

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    ("scores", "outcome", "reason"),
    [
        ({"pii": 0.1, "rude": 0.2}, "allow", "allowed"),
        ({"pii": 0.1, "rude": 0.6}, "deny", "decision 'rude' = 0.60 >= 0.6"),
        ({"pii": 0.1}, "no_verdict", "no verdict: no result for decision 'rude'"),
        ({"pii": 0.9}, "deny", "decision 'pii' = 0.90 >= 0.6"),
    ],
)
async def test_decision(scores: dict[str, float], outcome: str, reason: str) -> None:
    built: list[FakeDecisionModel] = []

    def factory(model: str) -> llm.DecisionModel:
        assert model == "fake/decisions"
        built.append(FakeDecisionModel(scores))
        return built[-1]

    entry = {
        "name": "judge",
        "type": "decision",
        "config": {
            "model": "fake/decisions",
            "decisions": {"pii": "The reply reveals personal data.", "rude": "The reply is rude."},
            "threshold": 0.6,
        },
    }
    guardrails = ResponseGuardrails.build([entry], decision_model=factory)
    for _ in range(3):
        [verdict] = await guardrails.check(ctx("the reply text"))
        assert (verdict.outcome, verdict.reason) == (outcome, reason)
    assert len(built) == 1  # built once, shared
    assert built[0].inputs == ["the reply text"] * 3
    await guardrails.aclose()
    assert built[0].closed


def test_decision_bad_config() -> None:
    def factory(model: str) -> llm.DecisionModel:
        raise KeyError(model)

    config = {"model": "nope/x", "decisions": {"x": "y"}}
    with pytest.raises(ResponseGuardrailError) as error:
        ResponseGuardrails.build(
            [{"name": "d", "type": "decision", "config": config}], decision_model=factory
        )
    assert str(error.value) == (
        "guardrails.response[0].config.model: cannot build 'nope/x' (KeyError: 'nope/x')"
    )
    with pytest.raises(ResponseGuardrailError, match=r"response\[0\]\.config\.threshold: expected"):
        ResponseGuardrails.build(
            [{"name": "d", "type": "decision", "config": {**config, "threshold": 2}}],
            decision_model=factory,
        )
    with pytest.raises(ResponseGuardrailError, match=r"response\[0\]\.config\.decisions: expected"):
        ResponseGuardrails.build(
            [{"name": "d", "type": "decision", "config": {"model": "m", "decisions": {}}}],
            decision_model=factory,
        )


# -- concurrency -------------------------------------------------------------------------------


async def test_one_shared_instance_keeps_concurrent_calls_apart() -> None:
    DenyOwnWord.constructed = 0
    DenyOwnWord.seen_instances.clear()
    DenyOwnWord.threads.clear()
    guardrails = ResponseGuardrails.build(
        [{"name": "own-word", "type": f"{HERE}:DenyOwnWord", "timeout": 60.0}]
    )
    calls = [f"call-{n}" for n in range(50)]
    contexts: list[CallContext] = []
    for k in range(200):
        call_id = calls[k % 50]
        # even k: the call's own word (deny); odd k: another call's word (allow)
        word_of = call_id if k % 2 == 0 else calls[(k + 7) % 50]
        contexts.append(ctx(f"please stop-{word_of} now", call_id=call_id))

    results = await asyncio.gather(*(guardrails.check(c) for c in contexts))

    for c, [verdict] in zip(contexts, results, strict=True):
        own = f"stop-{c.call_id}" in c.reply.split()
        assert verdict.outcome == ("deny" if own else "allow"), c
        if own:
            assert verdict.reason == f"{c.call_id} said its word"
            assert ResponseGuardrails.combine([verdict]) == (True, f"replacement for {c.call_id}")
    assert DenyOwnWord.constructed == 1
    assert len(DenyOwnWord.seen_instances) == 1
    assert len(DenyOwnWord.threads) > 1  # decide really ran in several worker threads
