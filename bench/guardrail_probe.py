"""Do sentence embeddings help the ``abusive`` classifier? The experiment behind the probe.

docs/guardrails.md, "Fifth round" and "Sixth round". It embeds every ``abusive``
training row and every held-out ``hatecheck`` and ``ethos`` row with one of two
encoders, fits a class-balanced L2 logistic regression (a "probe",
:func:`guardrails.training.fit_probe`) on the embeddings, and compares, with the
rules and their vetoes as ``learned`` uses them:

* **out of source** (the third round's method: each training source left out in
  turn, a model fitted on the other sources scores it; the threshold is the one with
  the highest recall at pooled precision 0.9): the n-gram classifier, the probe, and
  the mean of the two probabilities;
* **held out** (never used to choose anything): the n-gram classifier at its
  third-round threshold, and the mean of it and the probe fitted on every training
  row, at the threshold chosen out of source.

Encoders: ``wordllama`` (the shipped one, :mod:`guardrails.encoder`; seconds) and
``smollm2`` (the local LLM, SmolLM2-135M-Instruct, the Q8_0 file the runtime loads:
the mean of its last hidden layer; embedding 17,500 texts takes about 18 minutes on 2
cores, and ``--cache DIR`` keeps them). The n-gram classifiers fitted with each
source left out take about 3 minutes; ``--cache DIR`` keeps their scores too.

Usage::

    .venv/bin/python bench/guardrail_probe.py [--encoder wordllama] [--cache DIR] [--l2 X]
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
#: The n-gram classifier's threshold before the probe was shipped (out of source).
THIRD_ROUND_THRESHOLD = 0.89
#: Characters of a text the model reads (held-out posts can be long).
MAX_CHARS = 600

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def embed_wordllama(texts: list[str]) -> npt.NDArray[np.float32]:
    """The shipped encoder's embeddings (:mod:`guardrails.encoder`, WordLlama's)."""
    from guardrails.encoder import load_encoder  # noqa: PLC0415

    start = time.perf_counter()
    out = load_encoder().embed(texts)
    print(f"  wordllama: {len(texts)} texts in {time.perf_counter() - start:.1f} s", flush=True)
    return out


def embed(
    texts: list[str], cache: Path | None, name: str, encoder: str = "smollm2"
) -> npt.NDArray[np.float32]:
    """Sentence embeddings of ``texts``, unit length (the LLM's cached by name)."""
    if encoder == "wordllama":
        return embed_wordllama(texts)
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
    """The shipped probe's fit (:func:`guardrails.training.fit_probe`) as a callable."""

    def __init__(self, x: npt.NDArray[np.float32], y: Bools, l2: float) -> None:
        from guardrails.training import fit_probe  # noqa: PLC0415

        self.w, self.b = fit_probe(x, y, l2)

    def __call__(self, x: npt.NDArray[np.float32]) -> Floats:
        from guardrails.training import probe_probabilities  # noqa: PLC0415

        return probe_probabilities(x, self.w, self.b)


def figure(fired: Bools, truth: Bools, at: Bools | None = None) -> str:
    at = np.ones_like(truth) if at is None else at
    tp = int((fired & truth & at).sum())
    flagged, pos = int((fired & at).sum()), int((truth & at).sum())
    return f"P {tp / max(1, flagged):.3f} / R {tp / max(1, pos):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="keep embeddings here")
    parser.add_argument("--l2", type=float, default=0.01, help="the probe's L2 strength")
    parser.add_argument(
        "--encoder",
        choices=("smollm2", "wordllama"),
        default="smollm2",
        help="the sentence embeddings: the local LLM's mean last layer, or WordLlama's"
        " static ones (the wordllama package)",
    )
    parser.add_argument(
        "--deobfuscate",
        action="store_true",
        help="embed the text after guardrails.normalize.deobfuscate (as the n-grams read it)",
    )
    parser.add_argument(
        "--augment",
        action="store_true",
        help="fit the probe on the n-gram model's training texts (obfuscated copies and"
        " contrasts too; wordllama only: they are embedded per fold)",
    )
    parser.add_argument(
        "--no-heldout", action="store_true", help="out of source only: no held-out figure"
    )
    args = parser.parse_args(argv)

    from guardrails.learned import LearnedPack, load_learned_packs  # noqa: PLC0415
    from guardrails.learned_model import VETOES  # noqa: PLC0415
    from guardrails.normalize import deobfuscate  # noqa: PLC0415
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
    if args.augment and args.encoder != "wordllama":
        parser.error("--augment embeds per fold: only with --encoder wordllama")
    if args.deobfuscate and args.encoder != "wordllama":
        parser.error("--deobfuscate: only with --encoder wordllama (the cache holds raw text)")
    prep = deobfuscate if args.deobfuscate else (lambda t: t)

    def vectors(texts: list[str], name: str) -> npt.NDArray[np.float32]:
        return embed([prep(t) for t in texts], args.cache, name, args.encoder)

    x = vectors([r["text"] for r in rows], "train")

    # the n-gram folds do not depend on the probe's options: kept with the embeddings
    ngram_file = args.cache / f"ngram-oos-{len(rows)}.npy" if args.cache is not None else None
    ngram = np.zeros(len(rows))
    known = ngram_file is not None and ngram_file.is_file()
    if known:
        ngram = np.load(ngram_file)  # type: ignore[arg-type]
    probe = np.zeros(len(rows))
    for source in sorted(set(src)):
        inside = [r for r in rows if r["source"] != source]
        texts, labels = training_texts("abusive", inside, random.Random(f"train:abusive:{source}"))
        out = src == source
        if not known:
            weights, bias = fit(texts, np.array(labels), l2=L2)
            model = LearnedPack("abusive", weights, bias, threshold=0.5, anchor=ANCHOR)
            ngram[out] = [model.probability(r["text"]) for r in rows if r["source"] == source]
        if args.augment:
            fitted = Probe(vectors(texts, "fold"), np.array(labels) >= 0.5, args.l2)
        else:
            fitted = Probe(x[~out], y[~out], args.l2)
        probe[out] = fitted(x[out])
        print(f"  left out: {source}", flush=True)
    if ngram_file is not None and not known:
        np.save(ngram_file, ngram)

    print("\nout of source (each training source left out in turn), rules or classifier:")
    thresholds = {}
    for name, probs in (("n-gram", ngram), ("probe", probe), ("mean", (ngram + probe) / 2)):
        p = np.where(veto, 0.0, probs)
        t = choose_threshold(p, hit, y)
        thresholds[name] = t
        print(f"  {name:<8} threshold {t:.2f}: {figure(hit | (p >= t), y)}")

    if args.no_heldout:
        return 0
    h_hit, h_veto = rules(held)
    h_y = np.array([bool(r["label"]) for r in held])
    h_src = np.array([str(r["source"]) for r in held])
    h_x = vectors([r["text"] for r in held], "heldout")
    shipped = load_learned_packs()["abusive"]
    h_ngram = np.array([shipped.ngram_probability(r["text"]) for r in held])
    if args.augment:
        texts, labels = training_texts("abusive", rows, random.Random("train:abusive"))
        h_probe = Probe(vectors(texts, "all"), np.array(labels) >= 0.5, args.l2)(h_x)
    else:
        h_probe = Probe(x, y, args.l2)(h_x)
    print("\nheld out (never used to choose anything), rules or classifier:")
    for name, probs, t in (
        ("n-gram", h_ngram, THIRD_ROUND_THRESHOLD),
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
