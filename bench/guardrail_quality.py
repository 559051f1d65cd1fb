"""Pack precision and recall per source and sub-type: rules, classifier and both together.

Reads labelled JSON lines (``decision``, ``text``, ``label``, optional ``source`` and
``subtype``): the project's own sets (``bench/data/guardrail_labels*.jsonl``) and the
third-party held-out sets (``bench/data/heldout/*.jsonl``, never used for training
or tuning; sources and licences in the README there). A text is flagged when its
score reaches the default config's threshold for the decision (abusive 0.7, the
others 0.5). For each decision it prints, per set, precision (P) and recall (R) of
``rules`` alone, the ``classifier`` alone (its calibrated score, without the rules'
vetoes) and ``learned`` (rules + classifier, the ``learned`` backend); per sub-type,
the share flagged (recall for a positive sub-type, false-alarm rate for a negative
one); and the pooled held-out figure. A held-out source with positives only (``inthewild``) gets
its precision from the pool. Also the evaluation time per text.

Usage::

    .venv/bin/python bench/guardrail_quality.py [--sets FILE...] [--decisions NAME,...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import _syspath  # noqa: F401  (before the project imports: see bench/_syspath.py)
import numpy as np

from guardrails.learned_model import LearnedDecisionModel

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
OWN_SETS = [
    DATA / "guardrail_labels_final.jsonl",
    DATA / "guardrail_labels.jsonl",
    DATA / "guardrail_labels_analysis.jsonl",
]
HELDOUT_DIR = DATA / "heldout"
THRESHOLDS = {"abusive": 0.7}
DEFAULT_THRESHOLD = 0.5

#: label, rules fired, learned (combined) fired, subtype, classifier alone fired
Scored = list[tuple[bool, bool, bool, str, bool]]


class DataError(Exception):
    """A labelled set is missing or malformed."""


def read_set(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        raise DataError(f"{path}: expected a JSON-lines file of labelled texts")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            rows.append(
                {
                    "decision": str(item["decision"]),
                    "text": str(item["text"]),
                    "label": bool(item["label"]),
                    "subtype": str(
                        item.get("subtype") or ("positive" if item["label"] else "negative")
                    ),
                }
            )
        except (ValueError, KeyError, TypeError) as error:
            raise DataError(
                f"{path}:{number}: expected decision, text and label ({error})"
            ) from error
    return rows


def pr(items: Scored, which: int) -> tuple[float | None, float | None]:
    tp = sum(1 for it in items if it[0] and it[which])
    fp = sum(1 for it in items if not it[0] and it[which])
    pos = sum(1 for it in items if it[0])
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / pos if pos else None
    return precision, recall


def fmt(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def cells(items: Scored, classifier: bool) -> str:
    (rp, rr), (cp, cr), (lp, lr) = pr(items, 1), pr(items, 4), pr(items, 2)
    middle = f"{fmt(cp):>9} {fmt(cr)}" if classifier else f"{'':>9} {'':>6}"
    return f"{fmt(rp):>7} {fmt(rr)} | {middle} | {fmt(lp):>9} {fmt(lr)}"


def shares(part: Scored, classifier: bool) -> str:
    def share(which: int) -> float:
        return sum(bool(it[which]) for it in part) / len(part)

    middle = f"{share(4):>16.3f}" if classifier else f"{'':>16}"
    return f"{share(1):>13.3f} | {middle} | {share(2):>16.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="*", type=Path, default=None)
    parser.add_argument("--decisions", default=None, help="comma-separated decision names")
    args = parser.parse_args(argv)
    paths = args.sets or [*OWN_SETS, *sorted(HELDOUT_DIR.glob("*.jsonl"))]
    try:
        sets = {path: read_set(path) for path in paths}
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    model = LearnedDecisionModel()
    wanted = set(args.decisions.split(",")) if args.decisions else None
    scored: dict[str, dict[str, Scored]] = defaultdict(dict)
    timings: dict[str, list[float]] = defaultdict(list)
    for path, rows in sets.items():
        name = path.stem
        for row in rows:
            decision = str(row["decision"])
            if (wanted and decision not in wanted) or decision not in model.pack_names:
                continue
            threshold = THRESHOLDS.get(decision, DEFAULT_THRESHOLD)
            started = time.perf_counter()
            value, data = model.score(decision, str(row["text"]))
            timings[decision].append(time.perf_counter() - started)
            alone = model.classifier_score(decision, str(row["text"]))
            scored[decision].setdefault(name, []).append(
                (
                    bool(row["label"]),
                    data["rules"] >= threshold,
                    value >= threshold,
                    str(row["subtype"]),
                    alone is not None and alone >= threshold,
                )
            )
    heldout = {p.stem for p in paths if p.parent == HELDOUT_DIR}
    for decision in sorted(scored):
        threshold = THRESHOLDS.get(decision, DEFAULT_THRESHOLD)
        learned = decision in model.learned_pack_names
        print(
            f"\n-- {decision} (flagged at >= {threshold}; classifier: {'yes' if learned else 'no'})"
        )
        head = f"{'rules P':>7} {'R':>6} | {'classif P':>9} {'R':>6} | {'learned P':>9} {'R':>6}"
        print(f"{'set':<32} {'pos':>5} {'neg':>5} | {head}")
        pooled: Scored = []
        for name, items in scored[decision].items():
            if name in heldout:
                pooled += items
            pos = sum(1 for it in items if it[0])
            tag = f"{name}{' (held out)' if name in heldout else ''}"
            print(f"{tag:<32} {pos:>5} {len(items) - pos:>5} | {cells(items, learned)}")
            subtypes = sorted({it[3] for it in items})
            if len(subtypes) > 1:
                for sub in subtypes:
                    part = [it for it in items if it[3] == sub]
                    label = "recall" if part[0][0] else "flagged"
                    print(f"    {sub:<28} {len(part):>5} {label:>7} | {shares(part, learned)}")
        if pooled:
            pos = sum(1 for it in pooled if it[0])
            tag = "ALL HELD-OUT (pooled)"
            print(f"{tag:<32} {pos:>5} {len(pooled) - pos:>5} | {cells(pooled, learned)}")
        arr = np.asarray(timings[decision]) * 1000
        print(
            f"evaluation time (rules + classifier, one text): p50 {np.percentile(arr, 50):.2f} ms  "
            f"p95 {np.percentile(arr, 95):.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
