"""Would sentence embeddings from the local LLM help the ``abusive`` classifier?

An experiment, not a shipped backend (docs/guardrails.md, "Fifth round"). It embeds
every ``abusive`` training row and every held-out ``hatecheck`` and ``ethos`` row with
the default local LLM (SmolLM2-135M-Instruct, the Q8_0 file the runtime loads; mean
of its last hidden layer, unit length), fits a class-balanced L2 logistic regression
(a "probe") on the embeddings, and compares, with the rules and their vetoes as
``learned`` uses them:

* **out of source** (the third round's method: each training source left out in
  turn, a model fitted on the other sources scores it; the threshold is the one with
  the highest recall at pooled precision 0.9): the shipped n-gram classifier, the
  probe, and the mean of the two probabilities;
* **held out** (never used to choose anything): the shipped model, and the mean of
  the shipped n-gram classifier and the probe fitted on every training row, at the
  threshold chosen out of source.

Embedding 17,500 texts takes about 18 minutes on 2 cores; ``--cache DIR`` keeps them
between runs. The n-gram classifiers fitted with each source left out take about 3
minutes more.

Usage::

    .venv/bin/python bench/guardrail_probe.py [--cache DIR] [--l2 X]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "guardrails" / "data" / "train" / "abusive.jsonl"
HELDOUT = [ROOT / "bench" / "data" / "heldout" / f"{name}.jsonl" for name in ("hatecheck", "ethos")]
ANCHOR = 0.7
#: Characters of a text the model reads (held-out posts can be long).
MAX_CHARS = 600

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def embed(texts: list[str], cache: Path | None, name: str) -> npt.NDArray[np.float32]:
    """Mean-pooled last-layer embeddings of ``texts``, unit length (cached by name)."""
    target = cache / f"{name}-{len(texts)}.npy" if cache is not None else None
    if target is not None and target.is_file():
        return np.asarray(np.load(target), dtype=np.float32)
    from llama_cpp import Llama  # noqa: PLC0415

    from agent.models.gguf_weights import runtime_gguf_path  # noqa: PLC0415

    model = Llama(
        model_path=str(runtime_gguf_path()),
        embedding=True,
        n_ctx=512,
        n_threads=2,
        n_batch=512,
        pooling_type=1,  # mean
        verbose=False,
    )
    out = np.zeros((len(texts), model.n_embd()), dtype=np.float32)
    start = time.perf_counter()
    for i, text in enumerate(texts):
        out[i] = model.embed(text[:MAX_CHARS])
        if i and i % 2000 == 0:
            print(f"  {name}: {i}/{len(texts)} in {time.perf_counter() - start:.0f} s", flush=True)
    out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-9
    print(
        f"  {name}: {len(texts)} texts, {1000 * (time.perf_counter() - start) / len(texts):.0f} ms"
        " each",
        flush=True,
    )
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        np.save(target, out)
    return out


class Probe:
    """A class-balanced L2 logistic regression on standardised embeddings (full-batch Adam)."""

    def __init__(self, x: npt.NDArray[np.float32], y: Bools, l2: float, steps: int = 400) -> None:
        self.mu = x.mean(axis=0)
        self.sd = x.std(axis=0) + 1e-6
        z = (x - self.mu) / self.sd
        w = np.zeros(z.shape[1])
        b = 0.0
        pos = float(y.sum())
        weight = np.where(y, 0.5 / pos, 0.5 / (len(y) - pos))
        m, v = np.zeros_like(w), np.zeros_like(w)
        mb = vb = 0.0
        for t in range(1, steps + 1):
            p = 1.0 / (1.0 + np.exp(-np.clip(z @ w + b, -40, 40)))
            err = (p - y) * weight
            grad = z.T @ err + l2 * w
            gb = float(err.sum())
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad * grad
            w -= 0.05 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
            mb = 0.9 * mb + 0.1 * gb
            vb = 0.999 * vb + 0.001 * gb * gb
            b -= 0.05 * (mb / (1 - 0.9**t)) / (np.sqrt(vb / (1 - 0.999**t)) + 1e-8)
        self.w, self.b = w, b

    def __call__(self, x: npt.NDArray[np.float32]) -> Floats:
        z = ((x - self.mu) / self.sd) @ self.w + self.b
        return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -40, 40))), dtype=np.float64)


def figure(fired: Bools, truth: Bools, at: Bools | None = None) -> str:
    at = np.ones_like(truth) if at is None else at
    tp = int((fired & truth & at).sum())
    flagged, pos = int((fired & at).sum()), int((truth & at).sum())
    return f"P {tp / max(1, flagged):.3f} / R {tp / max(1, pos):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="keep embeddings here")
    parser.add_argument("--l2", type=float, default=0.01, help="the probe's L2 strength")
    args = parser.parse_args(argv)

    from guardrails.learned import LearnedPack, load_learned_packs  # noqa: PLC0415
    from guardrails.learned_model import VETOES  # noqa: PLC0415
    from guardrails.training import (  # noqa: PLC0415
        L2,
        choose_threshold,
        fit,
        load_packs,
        training_texts,
    )

    rows = read_rows(TRAIN)
    held = [r for path in HELDOUT for r in read_rows(path)]
    pack = load_packs()["abusive"]
    vetoes = VETOES["abusive"]
    print(f"training rows: {len(rows)}; held-out rows: {len(held)}", flush=True)

    def rules(rs: list[dict[str, Any]]) -> tuple[Bools, Bools]:
        hit = np.array([pack.score(r["text"])[0] >= ANCHOR for r in rs])
        veto = np.array([pack.exception_holds(r["text"], vetoes) for r in rs])
        return hit, veto

    hit, veto = rules(rows)
    y = np.array([bool(r["label"]) for r in rows])
    src = np.array([str(r["source"]) for r in rows])
    x = embed([r["text"] for r in rows], args.cache, "train")

    ngram = np.zeros(len(rows))
    probe = np.zeros(len(rows))
    for source in sorted(set(src)):
        inside = [r for r in rows if r["source"] != source]
        texts, labels = training_texts("abusive", inside, random.Random(f"train:abusive:{source}"))
        weights, bias = fit(texts, np.array(labels), l2=L2)
        model = LearnedPack("abusive", weights, bias, threshold=0.5, anchor=ANCHOR)
        out = src == source
        ngram[out] = [model.probability(r["text"]) for r in rows if r["source"] == source]
        probe[out] = Probe(x[~out], y[~out], args.l2)(x[out])
        print(f"  left out: {source}", flush=True)

    print("\nout of source (each training source left out in turn), rules or classifier:")
    thresholds = {}
    for name, probs in (("n-gram", ngram), ("probe", probe), ("mean", (ngram + probe) / 2)):
        p = np.where(veto, 0.0, probs)
        t = choose_threshold(p, hit, y)
        thresholds[name] = t
        print(f"  {name:<8} threshold {t:.2f}: {figure(hit | (p >= t), y)}")

    h_hit, h_veto = rules(held)
    h_y = np.array([bool(r["label"]) for r in held])
    h_src = np.array([str(r["source"]) for r in held])
    h_x = embed([r["text"] for r in held], args.cache, "heldout")
    shipped = load_learned_packs()["abusive"]
    h_ngram = np.array([shipped.probability(r["text"]) for r in held])
    h_probe = Probe(x, y, args.l2)(h_x)
    print("\nheld out (never used to choose anything), rules or classifier:")
    for name, probs, t in (
        ("shipped", h_ngram, shipped.threshold),
        ("mean", (h_ngram + h_probe) / 2, thresholds["mean"]),
    ):
        fired = h_hit | ((probs >= t) & ~h_veto)
        cells = [f"{s} {figure(fired, h_y, h_src == s)}" for s in ("hatecheck", "ethos")]
        print(
            f"  {name:<8} threshold {t:.2f}: " + "; ".join(cells) + f"; pooled {figure(fired, h_y)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
