"""Train the learned backend's classifiers from the shipped training sets.

``python -m guardrails.training [--data DIR] [--out DIR] [--packs abusive,...]``

For each pack with a ``<pack>.jsonl`` in ``guardrails/data/train/`` (rows of
``text``, ``label``, ``source``; see the README there for the sources and their
licences): the rows are split by a hash of their text into training (80 %) and
validation (20 %); each training text also gets one obfuscated copy with the same
label (a swapped, dropped or leet letter, a removed or added space), so that spelling
games do not become a signal of either class; a class-balanced logistic regression
over :func:`guardrails.learned.features` is fitted by full-batch Adam with an L2
penalty (``--l2 A,B,...`` fits each strength and keeps the one with the highest recall
at the operating point on the validation split; ``L2`` is the one that won); and the
threshold is, of the raw probabilities at which rules-or-classifier reaches
``PRECISION`` precision on the validation split, the one with the highest recall there
(the highest such probability when several tie). Everything is seeded: the
same data gives the same weights on the same numpy.

``abusive`` (``THRESHOLD_BY``) chooses its operating point another way: each training
source is left out in turn, a classifier fitted on the others scores it, and the
threshold is chosen as above on these out-of-source scores pooled (with the rules'
vetoes applied); the shipped weights are then fitted on every row, with no validation
split. Its training sources disagree on what abuse is, and a split by row measured
how well the classifier learnt each source's own style: the validation threshold was
looser than text from an unseen source bears.

Packs in ``PROBES`` (``abusive``) also get a probe: a class-balanced L2 logistic
regression on each row's sentence embedding (:mod:`guardrails.encoder`), fitted on
the rows as they are (no obfuscated copies or contrasts: with them the probe scored
lower out of source). The pack's probability is the mean of the n-gram model's and
the probe's, in the out-of-source folds that choose the threshold as in the shipped
file.

Nothing here is used at run time; only the ``.npz`` files it writes are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .learned import DIM, WEIGHTS_DIR, features
from .normalize import KNOWN_WORDS
from .rules import load_packs

DATA_DIR: Path = Path(__file__).with_name("data") / "train"
#: The score a pack's chosen threshold maps onto: the default configs' thresholds.
ANCHORS = {"abusive": 0.7, "prompt_injection": 0.5}
#: Precision the combined decision must reach on the validation split (or out of source).
PRECISION = 0.9
#: How each pack's operating point is chosen: ``sources`` (leave one training source out
#: at a time, :func:`train_pack_by_sources`; the weights are then fitted on every row) or,
#: for any other pack, the hashed validation split of its rows.
THRESHOLD_BY = {"abusive": "sources"}
#: Packs whose probability is the mean of the n-gram model and an embedding probe (only
#: packs whose threshold is chosen by source: the probe is fitted per fold there).
PROBES = frozenset({"abusive"})
#: The probe's L2 penalty and Adam steps. Out of source, abusive's mean reached recall
#: 0.470 to 0.476 at L2 from 0.001 to 1 (0.472 at 0.01): a tie within noise.
PROBE_L2 = 0.01
PROBE_STEPS = 400
EPOCHS = 300
#: The L2 penalty. On the validation split ``--l2 1e-5,3e-5,1e-4`` kept 1e-5 for
#: ``abusive`` (recall 0.635 against 0.621 and 0.574) and for ``prompt_injection``
#: (recall 1.0 at each: the first is kept on a tie); with ``abusive``'s sources left out
#: in turn, 1e-5 and 3e-5 reach out-of-source recall 0.445 and 0.447 at the operating
#: point, a tie within noise, so 1e-5 stays.
L2 = 1e-5
RATE = 0.05

_LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"}


def obfuscate(text: str, rng: random.Random) -> str:
    """One random spelling game on one word of ``text``."""
    words = text.split()
    if not words:
        return text
    i = rng.randrange(len(words))
    word = words[i]
    kind = rng.randrange(5)
    if kind == 0 and len(word) > 3:
        j = rng.randrange(len(word) - 1)
        word = word[:j] + word[j + 1] + word[j] + word[j + 2 :]
    elif kind == 1 and len(word) > 3:
        j = rng.randrange(1, len(word))
        word = word[:j] + word[j + 1 :]
    elif kind == 2 and i + 1 < len(words):
        words[i : i + 2] = [word + words[i + 1]]
        return " ".join(words)
    elif kind == 3 and len(word) > 2:
        word = " ".join(word)
    else:
        word = "".join(_LEET.get(c, c) if rng.random() < 0.5 else c for c in word)
    words[i] = word
    return " ".join(words)


# Contrast sets for the abusive classifier (after the identity-term templates of
# Dixon et al. 2018): naming a group is not hate, and neither is quoting abuse in
# order to reject it. Without them a bag of n-grams learns "women" or "hate" as abuse.
_GROUPS = [
    "women", "men", "trans people", "gay people", "lesbians", "bisexual people", "black people",
    "white people", "asian people", "muslims", "jews", "christians", "hindus", "immigrants",
    "refugees", "disabled people", "mexicans", "indians", "arabs", "deaf people", "old people",
]  # fmt: skip
_NEUTRAL = [
    "I love {g}.", "{G} are wonderful.", "My best friends are {g}.", "I work with a lot of {g}.",
    "There are many {g} in my town.", "{G} deserve the same respect as everyone.",
    "I don't hate {g}.", "I would never hurt {g}.", "Nobody should attack {g}.",
    "{G} are just people like anyone else.", "Our new manager cares about {g}.",
    "Is there a discount for {g}?", "My neighbours are {g} and they are lovely.",
    "I admire {g} for what they have been through.", "We should protect {g} from hate.",
]  # fmt: skip
_FRAMES = [
    'If you say "{s}", you are a bigot.', 'Saying "{s}" is not okay.',
    'I reported a post that said "{s}".', 'He was banned for writing "{s}".',
    'Comments like "{s}" have no place here.', 'Why would anyone say "{s}"?',
    'Someone wrote "{s}" under my photo and it really hurt.', 'It is wrong to say "{s}".',
]  # fmt: skip
_SWEARS = ["fucking", "bloody", "damn", "freaking", "goddamn", "shitty", "effing"]
_EXCLAIM = [
    "fucking hell, ",
    "bloody hell, ",
    "oh shit, ",
    "for fuck's sake, ",
    "damn it, ",
    "holy shit, ",
]
_HATE_VERB = re.compile(r"^(i|we) (hate|despise|detest|loathe|can't stand|cannot stand)\b", re.I)


def contrasts(rows: list[dict[str, Any]], rng: random.Random) -> list[tuple[str, float]]:
    """Negative examples that share words with abuse: group mentions, counter-speech, denial,
    and profanity used for emphasis in ordinary sentences (swearing is not abuse)."""
    out = [(t.format(g=g, G=g[0].upper() + g[1:]), 0.0) for g in _GROUPS for t in _NEUTRAL]
    plain = [r["text"] for r in rows if not r["label"] and 4 <= len(r["text"].split()) <= 20]
    for text in rng.sample(plain, min(600, len(plain))):
        words = text.split()
        if rng.random() < 0.5:
            i = rng.randrange(1, len(words))
            words.insert(i, rng.choice(_SWEARS))
            out.append((" ".join(words), 0.0))
        else:
            out.append((rng.choice(_EXCLAIM) + text[0].lower() + text[1:], 0.0))
    short = [r["text"] for r in rows if r["label"] and 3 <= len(r["text"].split()) <= 14]
    for text in rng.sample(short, min(400, len(short))):
        out.append((rng.choice(_FRAMES).format(s=text.rstrip(".!")), 0.0))
        if _HATE_VERB.match(text):
            out.append((_HATE_VERB.sub(lambda m: f"{m[1]} don't {m[2]}", text), 0.0))
    return out


def _in_validation(text: str) -> bool:
    return hashlib.sha256(text.lower().encode()).digest()[0] < 52  # about 20 %


def fit(
    texts: list[str],
    labels: npt.NDArray[np.float64],
    l2: float = L2,
) -> tuple[npt.NDArray[np.float32], float]:
    """A class-balanced L2 logistic regression over hashed features (full-batch Adam)."""
    rows = [features(t) for t in texts]
    keep = np.array([r.size > 0 for r in rows])
    rows = [r for r in rows if r.size]
    y = labels[keep]
    lengths = np.array([r.size for r in rows])
    idx = np.concatenate(rows)
    row_of = np.repeat(np.arange(len(rows)), lengths)
    scale = 1.0 / np.sqrt(lengths)
    val = scale[row_of]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pos = y.sum()
    weight = np.where(y > 0, 0.5 / pos, 0.5 / (len(y) - pos))
    w, b = _adam_logistic(
        DIM,
        EPOCHS,
        lambda w, b: np.add.reduceat(w[idx] * val, starts) + b,
        lambda err: np.bincount(idx, weights=err[row_of] * val, minlength=DIM),
        y,
        weight,
        l2,
    )
    return w.astype(np.float32), b


def _adam_logistic(
    dim: int,
    steps: int,
    logits: Callable[[npt.NDArray[np.float64], float], npt.NDArray[np.float64]],
    back: Callable[[npt.NDArray[np.float64]], npt.NDArray[Any]],
    y: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    l2: float,
) -> tuple[npt.NDArray[np.float64], float]:
    """Full-batch Adam on a weighted L2 logistic loss, from zeros: the weights and bias.

    Args:
        dim: Number of weights.
        steps: Adam steps.
        logits: The rows' logits for weights ``w`` and bias ``b``.
        back: The weights' gradient for the rows' weighted errors (without the penalty).
        y: The rows' labels (0.0 or 1.0).
        weight: Each row's weight in the loss.
        l2: The penalty.
    """
    w = np.zeros(dim)
    b = 0.0
    m, v = np.zeros(dim), np.zeros(dim)
    mb = vb = 0.0
    for step in range(1, steps + 1):
        p = 1.0 / (1.0 + np.exp(-np.clip(logits(w, b), -40, 40)))
        err = (p - y) * weight
        grad = back(err) + l2 * w
        gb = float(err.sum())
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        mb = 0.9 * mb + 0.1 * gb
        vb = 0.999 * vb + 0.001 * gb * gb
        b -= RATE * (mb / (1 - 0.9**step)) / (np.sqrt(vb / (1 - 0.999**step)) + 1e-8)
    return w, b


def fit_probe(
    x: npt.NDArray[np.float32], labels: npt.NDArray[np.bool_], l2: float = PROBE_L2
) -> tuple[npt.NDArray[np.float32], float]:
    """A class-balanced L2 logistic regression on embeddings (full-batch Adam).

    The embeddings are standardised for the fit; the returned weights and bias act on
    the raw embeddings (the standardisation is folded into them).
    """
    mu = x.mean(axis=0)
    sd = x.std(axis=0) + 1e-6
    z = (x - mu) / sd
    y = labels.astype(np.float64)
    pos = float(y.sum())
    weight = np.where(labels, 0.5 / pos, 0.5 / (len(y) - pos))
    w, b = _adam_logistic(
        z.shape[1], PROBE_STEPS, lambda w, b: z @ w + b, lambda err: z.T @ err, y, weight, l2
    )
    raw = w / sd
    return raw.astype(np.float32), float(b - mu @ raw)


def probe_probabilities(
    x: npt.NDArray[np.float32], weights: npt.NDArray[np.float32], bias: float
) -> npt.NDArray[np.float64]:
    """The probe's probabilities for embeddings ``x`` (as :class:`LinearProbe` computes)."""
    z = x.astype(np.float64) @ weights.astype(np.float64) + bias
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0))), dtype=np.float64)


def choose_threshold(
    probs: npt.NDArray[np.float64], rules_hit: npt.NDArray[np.bool_], labels: npt.NDArray[np.bool_]
) -> float:
    """The operating point on the validation split: of the probabilities at which
    rules-or-classifier reaches PRECISION, the one with the highest recall, and of those
    the highest (the most precise); 0.99 when none reaches it."""
    best: tuple[float, float] | None = None  # (recall, threshold)
    for t in np.round(np.arange(0.05, 0.99, 0.01), 2):
        fired = rules_hit | (probs >= t)
        tp = int((fired & labels).sum())
        if tp and tp / int(fired.sum()) >= PRECISION:
            point = (tp / int(labels.sum()), float(t))
            best = point if best is None else max(best, point)
    return best[1] if best is not None else 0.99


def training_texts(
    name: str, rows: list[dict[str, Any]], rng: random.Random
) -> tuple[list[str], list[float]]:
    """The texts and labels a pack is fitted on: ``rows``, one obfuscated copy of each,
    and for ``abusive`` the contrast examples drawn from them."""
    texts = [r["text"] for r in rows] + [obfuscate(r["text"], rng) for r in rows]
    labels = [float(r["label"]) for r in rows] * 2
    if name == "abusive":
        extra = contrasts(rows, rng)
        texts += [t for t, _ in extra]
        labels += [y for _, y in extra]
    return texts, labels


def train_pack(
    name: str, path: Path, out: Path, l2_values: tuple[float, ...] = (L2,)
) -> dict[str, Any]:
    """Fit pack ``name`` and write its ``.npz``, choosing its operating point as
    ``THRESHOLD_BY`` says (:func:`train_pack_by_sources`, which fits the first of
    ``l2_values`` only, or the validation split)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if THRESHOLD_BY.get(name) == "sources":
        return train_pack_by_sources(name, rows, out, l2_values[0])
    train = [r for r in rows if not _in_validation(r["text"])]
    valid = [r for r in rows if _in_validation(r["text"])]
    rng = random.Random(f"train:{name}")
    texts, labels = training_texts(name, train, rng)
    from .learned import LearnedPack  # noqa: PLC0415

    anchor = ANCHORS.get(name, 0.5)
    pack = load_packs()[name]
    rules_hit = np.array([pack.score(r["text"])[0] >= anchor for r in valid])
    truth = np.array([bool(r["label"]) for r in valid])
    best: tuple[float, float, float, npt.NDArray[np.float32], float, float] | None = None
    for l2 in l2_values:
        weights, bias = fit(texts, np.array(labels), l2=l2)
        model = LearnedPack(name, weights, bias, threshold=0.5, anchor=anchor)
        probs = np.array([model.probability(r["text"]) for r in valid])
        threshold = choose_threshold(probs, rules_hit, truth)
        fired = rules_hit | (probs >= threshold)
        tp = int((fired & truth).sum())
        recall = tp / max(1, int(truth.sum()))
        precision = tp / max(1, int(fired.sum()))
        if len(l2_values) > 1:
            print(f"{name} l2={l2:g}: validation P {precision:.3f} R {recall:.3f}")
        if best is None or recall > best[0]:
            best = (recall, precision, threshold, weights, bias, l2)
    if best is None:
        raise ValueError("expected at least one L2 strength")
    recall, precision, threshold, weights, bias, l2 = best
    _save(out, name, weights, bias, threshold, anchor)
    return {
        "train": len(train),
        "validation": len(valid),
        "l2": l2,
        "threshold": threshold,
        "validation_precision": precision,
        "validation_recall": recall,
    }


def _save(
    out: Path,
    name: str,
    weights: npt.NDArray[np.float32],
    bias: float,
    threshold: float,
    anchor: float,
    probe: tuple[npt.NDArray[np.float32], float] | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {}
    if probe is not None:
        extra = {"probe_weights": probe[0].astype(np.float32), "probe_bias": np.float64(probe[1])}
    np.savez_compressed(
        out / f"{name}.npz",
        weights=weights.astype(np.float16),
        bias=np.float64(bias),
        threshold=np.float64(threshold),
        anchor=np.float64(anchor),
        **extra,
    )


def train_pack_by_sources(
    name: str, rows: list[dict[str, Any]], out: Path, l2: float = L2
) -> dict[str, Any]:
    """Fit pack ``name`` on every row; choose its operating point leaving one source out.

    For each training source in turn, a classifier is fitted on the other sources' rows
    (with their obfuscated copies and contrasts) and scores every row of the source left
    out. Pooled over the sources, these out-of-source probabilities, together with the
    rules and their vetoes, give the threshold as :func:`choose_threshold` does on a
    validation split. A split by row within a source measures how well the classifier
    learnt that source's style; one source left out is closer to text from a source it
    never saw, which is what the held-out sets (and calls) are.
    """
    from .learned import LearnedPack  # noqa: PLC0415
    from .learned_model import VETOES  # noqa: PLC0415

    anchor = ANCHORS.get(name, 0.5)
    pack = load_packs()[name]
    vetoes = VETOES.get(name, frozenset())
    sources = sorted({str(r["source"]) for r in rows})
    x: npt.NDArray[np.float32] | None = None
    if name in PROBES:
        from .encoder import load_encoder  # noqa: PLC0415

        x = load_encoder().embed([str(r["text"]) for r in rows])
    y_all = np.array([bool(r["label"]) for r in rows])
    src_all = np.array([str(r["source"]) for r in rows])
    probs: list[float] = []
    rules_hit: list[bool] = []
    truth: list[bool] = []
    of_source: list[str] = []
    for source in sources:
        inside = [r for r in rows if r["source"] != source]
        left_out = [r for r in rows if r["source"] == source]
        texts, labels = training_texts(name, inside, random.Random(f"train:{name}:{source}"))
        weights, bias = fit(texts, np.array(labels), l2=l2)
        model = LearnedPack(name, weights, bias, threshold=0.5, anchor=anchor)
        out_mask = src_all == source
        probe_p = np.zeros(len(left_out))
        if x is not None:
            pw, pb = fit_probe(x[~out_mask], y_all[~out_mask])
            probe_p = probe_probabilities(x[out_mask], pw, pb)
        for r, q in zip(left_out, probe_p, strict=True):
            vetoed = pack.exception_holds(r["text"], vetoes)
            p_row = model.probability(r["text"])
            if x is not None:
                p_row = (p_row + float(q)) / 2
            probs.append(0.0 if vetoed else p_row)
            rules_hit.append(pack.score(r["text"])[0] >= anchor)
            truth.append(bool(r["label"]))
            of_source.append(source)
    p, hit, y = np.array(probs), np.array(rules_hit), np.array(truth)
    threshold = choose_threshold(p, hit, y)
    fired = hit | (p >= threshold)
    src = np.array(of_source)
    per_source = {}
    for source in sources:
        at = src == source
        tp, flagged, pos = int((fired & y & at).sum()), int((fired & at).sum()), int((y & at).sum())
        per_source[source] = {
            "precision": round(tp / flagged, 3) if flagged and pos else None,
            "recall": round(tp / pos, 3) if pos else None,
            "flagged_negatives": round(
                int((fired & ~y & at).sum()) / max(1, int((~y & at).sum())), 3
            ),
        }
    tp = int((fired & y).sum())
    texts, labels = training_texts(name, rows, random.Random(f"train:{name}"))
    weights, bias = fit(texts, np.array(labels), l2=l2)
    probe = fit_probe(x, y_all) if x is not None else None
    _save(out, name, weights, bias, threshold, anchor, probe)
    return {
        "train": len(rows),
        "l2": l2,
        "probe": probe is not None,
        "threshold": threshold,
        "out_of_source_precision": round(tp / max(1, int(fired.sum())), 3),
        "out_of_source_recall": round(tp / max(1, int(y.sum())), 3),
        "per_source": per_source,
    }


def write_known_words(data: Path, out: Path, min_count: int = 3) -> int:
    """Write the common-word list the rule packs' typo tolerance must not touch.

    The words (letters only, three or more) that occur ``min_count`` times or more in
    the training sets' negative rows: ordinary language, not abuse or attacks.
    """
    counts: Counter[str] = Counter()
    for path in sorted(data.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                if not item["label"]:
                    counts.update(re.findall(r"[a-z]{3,}", item["text"].lower().replace("'", "")))
    words = sorted(w for w, n in counts.items() if n >= min_count)
    out.write_text("\n".join(words) + "\n", encoding="utf-8")
    return len(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--packs", default=",".join(ANCHORS))
    parser.add_argument(
        "--l2", default=str(L2), help="comma-separated L2 strengths to choose from on validation"
    )
    args = parser.parse_args(argv)
    count = write_known_words(args.data, KNOWN_WORDS)
    print(f"{KNOWN_WORDS.name}: {count} words")
    for name in [p.strip() for p in args.packs.split(",") if p.strip()]:
        path = args.data / f"{name}.jsonl"
        if not path.is_file():
            print(f"error: {path}: expected a training set for pack {name!r}", file=sys.stderr)
            return 2
        report = train_pack(name, path, args.out, tuple(float(v) for v in args.l2.split(",")))
        print(name, json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
