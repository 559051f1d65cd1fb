"""``python -m agent decide``: evaluate decisions on text lines from stdin.

One JSON object per input line on stdout::

    {"text": "...", "results": {"abusive": 0.93}, "errors": {}, "latency": 0.0002}

``latency`` is wall-clock seconds for the evaluation. With ``--model learned`` each
line also says which part fired per decision (``"fired": {"abusive": "learned"}``:
``rules``, ``learned``, ``both`` or null). Bad arguments raise
:class:`DecideError` (one line naming the option and what was expected).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from livekit.agents import llm

from guardrails.config import BUILTIN_PROMPTS

__all__ = ["DecideError", "parse_decisions", "run_decide"]


class DecideError(ValueError):
    """A bad ``decide`` argument."""


def parse_decisions(
    specs: Iterable[str], *, rules: bool, pack_names: Iterable[str] = ()
) -> dict[str, llm.Decision]:
    """``NAME`` or ``NAME=PROMPT`` options as Probability decisions.

    With the rules model, NAME selects a pack (a prompt is accepted and unused);
    with other models, NAME alone is allowed for the built-in decision names.
    """
    packs = set(pack_names)
    out: dict[str, llm.Decision] = {}
    for spec in specs:
        name, sep, prompt = spec.partition("=")
        name, prompt = name.strip(), prompt.strip()
        if not name:
            raise DecideError(f"--decision {spec!r}: expected NAME or NAME=PROMPT")
        if name in out:
            raise DecideError(f"--decision {name!r}: given twice")
        if rules and name not in packs:
            raise DecideError(
                f"--decision {name!r}: the rules model has no pack of that name "
                f"(packs: {', '.join(sorted(packs))})"
            )
        if not prompt:
            prompt = BUILTIN_PROMPTS.get(name, "")
            if not prompt and not rules:
                raise DecideError(
                    f"--decision {name!r}: expected NAME=PROMPT (only "
                    f"{', '.join(BUILTIN_PROMPTS)} may be named alone)"
                )
            prompt = prompt or name
        elif sep and not prompt:
            raise DecideError(f"--decision {spec!r}: the prompt after '=' is empty")
        out[name] = llm.Probability(prompt)
    if not out:
        raise DecideError("--decision: give at least one decision")
    return out


def _fired(results: dict[str, Any]) -> dict[str, Any]:
    """Which part of a combined model fired, per decision (``provider_data["fired"]``)."""
    out = {}
    for name, result in results.items():
        data = getattr(result, "provider_data", None)
        if isinstance(data, dict) and "fired" in data:
            out[name] = data["fired"]
    return out


def _value(result: Any) -> Any:
    value = result.value
    return round(value, 4) if isinstance(value, float) else value


async def run_decide(
    model: llm.DecisionModel,
    decisions: dict[str, llm.Decision],
    lines: TextIO,
    out: TextIO,
) -> int:
    """Evaluate every non-blank line of ``lines``; returns the number evaluated."""
    n = 0
    for raw in lines:
        text = raw.rstrip("\n")
        if not text.strip():
            continue
        started = time.perf_counter()
        errors: dict[str, str]
        try:
            response = await model.evaluate(input=text, decisions=decisions)
            results = {name: _value(r) for name, r in response.results.items()}
            fired = _fired(response.results)
            errors = dict(response.errors)
        except Exception as exc:  # one failed line must not stop the rest
            results, fired, errors = {}, {}, {"_request": f"{type(exc).__name__}: {exc}"}
        latency = time.perf_counter() - started
        line: dict[str, Any] = {"text": text, "results": results}
        if fired:
            line["fired"] = fired
        line.update(errors=errors, latency=round(latency, 6))
        out.write(json.dumps(line) + "\n")
        out.flush()
        n += 1
    return n


def main(model: llm.DecisionModel, decisions: dict[str, llm.Decision]) -> int:
    """Read stdin, write stdout; returns the number of lines evaluated."""
    return asyncio.run(run_decide(model, decisions, sys.stdin, sys.stdout))
