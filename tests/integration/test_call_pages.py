"""Per-call timeline pages and the suite index, checked in headless Chromium.

Replays go through the CLI (``replay --report DIR``) with the default local
models; each page must load with no console error, no uncaught exception and
no failed load, and show one span per turn the replay reported; no two text
labels of the timeline may overlap, none may be clipped by the drawing's edge, and
every table column has a header.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.browser import chromium, file_url, open_page
from tests.integration.test_cli import ROOT, run_cli

pytestmark = pytest.mark.integration

AMD = ROOT / "tests" / "calls" / "amd"
TEXT_CALLS = [
    AMD / "human-hello-plain.call.yaml",
    AMD / "ivr-billing-press-2.call.yaml",
    AMD / "vm-chris-beep-1000.call.yaml",
    ROOT / "tests" / "calls" / "inbound-billing-question.call.yaml",
]
AUDIO_CALL = ROOT / "configs" / "demo" / "demo-voicemail-beep.call.yaml"

COUNTS = {
    "span_turns": "document.querySelectorAll('svg g.turn').length",
    "table_turns": "document.querySelectorAll('tr.turn-row').length",
    "svgs": "document.querySelectorAll('svg').length",
    "stage_bars": "document.querySelectorAll('svg g.stages').length",
    "stage_rows": "document.querySelectorAll('tr.stage-row').length",
    "external": "Array.from(document.querySelectorAll('[src],[href]'))"
    ".map(e => e.getAttribute('src') || e.getAttribute('href'))"
    ".filter(u => /^(https?:)?\\/\\//.test(u)).length",
    # every pair of drawn labels whose boxes intersect, as [text, text]
    "overlaps": """(() => {
        const boxes = Array.from(document.querySelectorAll('svg text'))
            .filter(t => t.textContent.trim())
            .map(t => [t.textContent, t.getBoundingClientRect()]);
        const out = [];
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const [a, p] = boxes[i], [b, q] = boxes[j];
            if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom)
                out.push([a, b]);
        }
        return out; })()""",
    # labels that reach past the drawing's edges
    "clipped": """(() => {
        const svg = document.querySelector('svg').getBoundingClientRect();
        return Array.from(document.querySelectorAll('svg text'))
            .filter(t => t.textContent.trim())
            .filter(t => { const r = t.getBoundingClientRect();
                return r.right > svg.right + 0.5 || r.left < svg.left - 0.5
                    || r.bottom > svg.bottom + 0.5; })
            .map(t => t.textContent); })()""",
    "empty_headers": "Array.from(document.querySelectorAll('th'))"
    ".filter(th => !th.textContent.trim()).length",
    "amd": "Array.from(document.querySelectorAll('table.figures th'))"
    ".find(th => th.textContent === 'AMD').nextElementSibling.textContent",
}


def _replay(tmp_path: Path, *args: str) -> tuple[Path, dict[str, dict[str, object]]]:
    report = tmp_path / "report"
    done = run_cli("replay", *args, "--json", "--report", str(report), timeout=600)
    assert done.returncode in (0, 1), done.stderr
    results = {}
    for line in done.stdout.splitlines():
        data = json.loads(line)
        results[data["name"]] = data
    return report, results


@pytest.mark.timeout(600)
def test_text_replay_pages_render_without_errors_and_show_every_turn(tmp_path: Path) -> None:
    chromium()
    report, results = _replay(tmp_path, *map(str, TEXT_CALLS), "--text-only")
    assert len(results) == len(TEXT_CALLS)
    for name, result in results.items():
        page = report / "calls" / f"{name}.html"
        seen = asyncio.run(open_page(file_url(page), COUNTS))
        assert seen.errors == [], (name, seen.errors)
        turns = len(result["turns"])  # type: ignore[arg-type]
        assert turns > 0
        assert seen.values["span_turns"] == turns, name
        assert seen.values["table_turns"] == turns, name
        # one stacked latency bar and one stages row per answered turn with a breakdown
        answered = sum(1 for t in result["turns"] if "latency" in t)  # type: ignore[attr-defined,misc]
        assert seen.values["stage_bars"] == answered, name
        assert seen.values["stage_rows"] == answered, name
        assert seen.values["svgs"] == 1
        assert seen.values["external"] == 0
        assert seen.values["overlaps"] == [], name
        assert seen.values["clipped"] == [], name
        assert seen.values["empty_headers"] == 0, name
        if name.startswith("inbound"):
            assert seen.values["amd"] == "n/a (inbound)"
    index = asyncio.run(
        open_page(
            file_url(report / "index.html"),
            {
                "links": "Array.from(document.querySelectorAll('a')).map(a => a.href)",
                "rows": "document.querySelectorAll('tr.call').length",
            },
        )
    )
    assert index.errors == []
    assert index.values["rows"] == len(TEXT_CALLS)
    linked = {Path(re.sub("^file://", "", u)).name for u in index.values["links"]}
    assert linked == {f"{name}.html" for name in results}


@pytest.mark.timeout(600)
def test_an_audio_replay_page_draws_both_channels_and_plays_the_recording(
    tmp_path: Path,
) -> None:
    chromium()
    report, results = _replay(tmp_path, str(AUDIO_CALL))
    ((name, result),) = results.items()
    page = report / "calls" / f"{name}.html"
    seen = asyncio.run(
        open_page(
            file_url(page),
            {
                **COUNTS,
                "waves": "document.querySelectorAll('path.wave').length",
                "audio_seconds": "new Promise(r => { const a = document.querySelector('audio');"
                " if (a.readyState >= 1) r(a.duration);"
                " else a.addEventListener('loadedmetadata', () => r(a.duration)); })",
            },
        )
    )
    assert seen.errors == []
    assert seen.values["waves"] == 2
    assert seen.values["overlaps"] == []
    assert seen.values["clipped"] == []
    assert seen.values["span_turns"] == len(result["turns"])  # type: ignore[arg-type]
    assert seen.values["external"] == 0
    # the embedded recording is the call: as long as the replay says the call was
    duration = float(result["duration"])  # type: ignore[arg-type]
    assert abs(seen.values["audio_seconds"] - duration) < 1.0
