"""Guardrail cost and quality: sentence-gate latency, eager readiness, pack precision/recall.

Prints three sections (figures only; it asserts nothing):

1. **Sentence gate, added latency** (wall clock, real loop). For each of a set of
   agent replies streamed by a scripted LLM stream, the time from the start of
   the reply to its first released sentence, through the real path
   (SentenceGate -> session hooks -> guardrail actor -> DecisionGuardrail ->
   decision model) with the config's ``on_agent_sentence`` checks, against the
   same gate with no checks. The difference is what the gate adds to the first
   agent audio; TTS and the LLM are the same either way. Target: p50 <= 10 ms
   with the rules backend.
2. **Eager evaluation** (replays). Replays recorded calls and counts, for each
   user-turn check at the end of a turn, whether its eager result was ``ready``,
   still ``pending``, or a ``miss`` (the final text differed). Target: ready >= 90 %.
   On the virtual clock a model's compute takes no replay time, so use
   ``--real-clock`` for a slow backend.
3. **Pack precision and recall** on a labelled set (``bench/data/guardrail_labels.jsonl``),
   per decision, at the thresholds 0.5 and 0.7, with the evaluation time.
4. **Per source and sub-type** (``bench/guardrail_quality.py``): rules alone against
   rules + the learned classifiers, on the project's sets and on the third-party
   held-out sets in ``bench/data/heldout/`` (never used for training or tuning).

``--model learned`` runs the rules packs plus the learned classifiers
(``guardrails/learned_model.py``).

Usage::

    .venv/bin/python bench/guardrails.py [--model rules] [--calls PATH...] [--text-only]
        [--labels FILE] [--replies N] [--real-clock] [--config FILE] [--sections 1,2,3,4]
        [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shlex
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np
from livekit.agents import llm

from agent.app.config import AgentConfig, ConfigError, load_config
from agent.app.guarding import GuardrailFactory, GuardrailHooks
from agent.app.logs import setup_logging
from agent.core import Bus, CallScope, clock
from agent.core.messages import GuardrailEvaluated
from agent.models.registry import ModelConfigError, UnknownModelError, build_decision_model
from agent.replay.loader import RecordedCallError, load_paths
from agent.replay.runner import Replayer, ReplayOptions
from agent.session.sentences import SentenceGate
from guardrails.actor import GuardrailActor
from guardrails.config import install_checks
from guardrails.decision import DecisionGuardrail

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_CALLS = [ROOT / "tests" / "calls", ROOT / "tests" / "calls" / "guardrails"]
DEFAULT_LABELS = ROOT / "bench" / "data" / "guardrail_labels.jsonl"

REPLIES = [
    "Hi, this is Sam from Acme Dental, calling to confirm your cleaning tomorrow at ten. "
    "Does that still work for you?",
    "Sure, I can help with that. Your appointment is on Thursday at ten in the morning.",
    "Thanks for letting me know. I have moved it to Friday at nine. Anything else?",
    "I'm sorry to hear that, let me check what happened with your bill.",
    "Of course. The card we have on file ends in four two. Shall I use it?",
    "Great, you're all set. Have a lovely day, goodbye.",
]


def command_line() -> str:
    """The command as run, prefixed with its working directory."""
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, *sys.argv])}"


def pct(values: list[float], scale: float = 1.0, unit: str = "") -> str:
    if not values:
        return "n=0"
    arr = np.asarray(values, dtype=np.float64) * scale
    return (
        f"n={arr.size}  p50={np.percentile(arr, 50):.2f}{unit}  "
        f"p95={np.percentile(arr, 95):.2f}{unit}  max={arr.max():.2f}{unit}"
    )


async def _stream(text: str) -> AsyncIterator[str]:
    # LLM-sized pieces, as a streaming model delivers them
    for i in range(0, len(text), 4):
        yield text[i : i + 4]
        await asyncio.sleep(0)


class _Slot:
    guardrail: Any = None


async def _first_sentence(gate: SentenceGate, text: str) -> float | None:
    """Seconds to the first released sentence; None when the gate released nothing."""
    started = time.perf_counter()
    first = None
    async for item in gate.process(_stream(text)):
        if first is None and isinstance(item, str) and item.strip():
            first = time.perf_counter() - started
    return first


async def gate_latency(config: AgentConfig, factory: GuardrailFactory, n: int) -> None:
    bus = Bus("bench")
    decision = DecisionGuardrail(
        _Slot(), model=factory.decision_model(config.guardrails), timeout=config.guardrails.timeout
    )
    install_checks(decision, config.guardrails)
    actor = GuardrailActor(call_id="bench", bus=bus, guardrail=decision)
    hooks = GuardrailHooks(actor, "bench")
    checks = len(decision._checks["on_agent_sentence"])

    async def hooked(run_id: str, index: int, text: str) -> bool:
        verdict = await hooks.on_agent_sentence(run_id, index, text)
        return verdict.action != "block"

    async def plain(run_id: str, index: int, text: str) -> bool:
        return True

    # load weights and warm caches before anything is timed
    await decision.model.evaluate(input=REPLIES[0], decisions={"x": llm.Probability("x")})
    on: list[float] = []
    off: list[float] = []
    blocked = 0
    async with CallScope("bench") as scope:
        scope.start_actor(actor)
        for i in range(n):
            text = REPLIES[i % len(REPLIES)]
            # alternate the order so warm-up and drift hit both sides alike
            order = [plain, hooked] if i % 2 else [hooked, plain]
            got = {
                check: await _first_sentence(SentenceGate(run_id=f"r{i}", check=check), text)
                for check in order
            }
            if got[hooked] is None:
                blocked += 1  # a check blocked (or failed and blocked) the first sentence
                continue
            on.append(got[hooked])  # type: ignore[arg-type]
            off.append(got[plain])  # type: ignore[arg-type]
        await scope.shutdown(1.0)
    added = [a - b for a, b in zip(on, off, strict=True)]
    print(f"sentence checks on the hook: {checks} (model: {config.guardrails.model})")
    if blocked:
        print(f"  replies whose first sentence was blocked (not timed): {blocked} of {n}")
    print(f"  first sentence, gate with checks : {pct(on, 1000, ' ms')}")
    print(f"  first sentence, gate without     : {pct(off, 1000, ' ms')}")
    print(f"  added by the checks              : {pct(added, 1000, ' ms')}  (target p50 <= 10 ms)")


def eager(calls: list[Any], config: AgentConfig, *, text_only: bool, virtual: bool) -> None:
    replayer = Replayer(config, ReplayOptions(text_only=text_only))
    states: Counter[str] = Counter()
    latencies: list[float] = []

    async def main() -> None:
        for call in calls:
            r = await replayer.replay(call)
            for msg in r.messages:
                if isinstance(msg, GuardrailEvaluated) and msg.hook == "on_user_turn":
                    states[msg.eager or "off"] += 1
                    latencies.append(msg.latency)

    clock.run(main(), virtual=virtual)
    total = sum(states.values())
    share = states["ready"] / total if total else 0.0
    print(f"user turns checked: {total}  " + "  ".join(f"{k}={v}" for k, v in states.items()))
    print(f"  eager result ready at end of turn: {share:.1%}  (target >= 90 %)")
    print(f"  check latency at end of turn     : {pct(latencies, 1000, ' ms')}")


def packs(path: Path, model_spec: str) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    model = build_decision_model(model_spec)
    by: dict[str, list[tuple[str, bool]]] = {}
    for row in rows:
        by.setdefault(row["decision"], []).append((row["text"], bool(row["label"])))
    timings: list[float] = []

    async def main() -> dict[str, list[tuple[bool, float]]]:
        out: dict[str, list[tuple[bool, float]]] = {}
        for name, items in sorted(by.items()):
            decisions = {name: llm.Probability(name)}
            for text, label in items:
                started = time.perf_counter()
                response = await model.evaluate(input=text, decisions=decisions)
                timings.append(time.perf_counter() - started)
                result = response.results.get(name)
                value = result.value if isinstance(result, llm.ProbabilityResult) else 0.0
                out.setdefault(name, []).append((label, value))
        return out

    scored = asyncio.run(main())
    print(f"labelled set: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    head = " | ".join(f"{f'P@{t}':>6} {f'R@{t}':>6}" for t in ("0.5", "0.7"))
    print(f"{'decision':<18} {'pos':>4} {'neg':>4} | {head}")
    for name, pairs in scored.items():
        pos = sum(1 for label, _ in pairs if label)
        cells = []
        for threshold in (0.5, 0.7):
            tp = sum(1 for label, v in pairs if label and v >= threshold)
            fp = sum(1 for label, v in pairs if not label and v >= threshold)
            precision = tp / (tp + fp) if tp + fp else 1.0
            recall = tp / pos if pos else 1.0
            cells.append(f"{precision:>6.3f} {recall:>6.3f}")
        print(f"{name:<18} {pos:>4} {len(pairs) - pos:>4} | {cells[0]} | {cells[1]}")
    print(f"evaluation time ({model_spec}, one decision): {pct(timings, 1e6, ' us')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="decision model (default: the config's)")
    parser.add_argument("--timeout", type=float, default=None, help="check timeout (seconds)")
    parser.add_argument("--calls", nargs="*", type=Path, default=None, help="calls for eager")
    parser.add_argument("--text-only", action="store_true", help="replay calls text-only")
    parser.add_argument("--real-clock", action="store_true", help="replay on the wall clock")
    parser.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    parser.add_argument("--replies", type=int, default=300, help="replies for the gate timing")
    parser.add_argument("--config", type=Path, default=None, help="agent config YAML")
    parser.add_argument(
        "--sections", default="1,2,3,4", help="which sections to run, e.g. 2 or 1,3 (default all)"
    )
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",")}

    setup_logging(verbose=False, json_logs=False)
    print(f"$ {command_line()}")
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    try:
        config = load_config(args.config)
        update: dict[str, Any] = {}
        if args.model:
            update["model"] = args.model
        if args.timeout:
            update["timeout"] = args.timeout
        if update:
            config = config.model_copy(
                update={"guardrails": config.guardrails.model_copy(update=update)}
            )
        calls = load_paths(args.calls or DEFAULT_CALLS)
        factory = GuardrailFactory()
        factory.decision_model(config.guardrails)
    except (ConfigError, RecordedCallError, UnknownModelError, ModelConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if "1" in sections:
        print("\n== 1. sentence gate: added latency to the first released sentence (wall clock)")
        asyncio.run(gate_latency(config, factory, args.replies))
    if "2" in sections:
        mode = "text-only" if args.text_only else "audio"
        clock_name = "real" if args.real_clock else "virtual"
        print(
            f"\n== 2. eager user-turn evaluation ({len(calls)} calls, {mode}, {clock_name} clock)"
        )
        eager(calls, config, text_only=args.text_only, virtual=not args.real_clock)
    if "3" in sections:
        print("\n== 3. built-in packs: precision and recall")
        packs(args.labels, config.guardrails.model)
    if "4" in sections:
        print("\n== 4. packs per source and sub-type: rules alone, rules + learned classifiers")
        # bench/ is off sys.path (bench/_syspath.py): load the sibling script by its file
        spec = importlib.util.spec_from_file_location(
            "guardrail_quality", HERE / "guardrail_quality.py"
        )
        assert spec is not None and spec.loader is not None
        quality = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(quality)
        quality.main([])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
