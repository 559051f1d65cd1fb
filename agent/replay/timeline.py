"""One call as a self-contained HTML page: waveforms, turns, AMD, guardrails, latencies.

The page is built from what a call published on its bus (the replayed call's
messages), its judged result and, when there is one, its stereo recording
(callee left, agent right). Everything is inline: SVG lanes on one time axis
(seconds after the answer), tables, and the recording as a data URI in an
``<audio>`` player, so the file opens anywhere without a network.

Lanes: both channels' waveforms, VAD speech segments, the callee's turns and
the agent's turns as labelled spans (interrupted agent turns are barge-ins),
agent sentences (blocked ones in red), AMD predictions, stage changes and
tones, guardrail evaluations (colour by action), DTMF both ways, and for each
answered callee turn its response latency: a bar stacked by stage (vad, stt,
endpointing, ...) from the turn's origin to the agent's first audio where the
result carries the turn's breakdown, else one span from the end of the line's
audio to the agent's next first audio. Figures from a virtual clock say so:
models take no time there.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agent.core.messages import (
    LATENCY_STAGES,
    AgentSentence,
    AgentSpeechStarted,
    AmdCompleted,
    AmdPrediction,
    AmdTone,
    CallAnswered,
    CallStarted,
    DtmfReceived,
    DtmfSent,
    GuardrailEvaluated,
    InterruptRun,
    UserSpeechStarted,
    UserSpeechStopped,
)
from agent.replay.labels import Label, Placed, place_labels
from agent.replay.observer import answered_lines
from agent.replay.results import CallResult, Turn, TurnLatencyResult

if TYPE_CHECKING:
    from agent.replay.runner import ReplayedCall

__all__ = [
    "STAGE_COLORS",
    "VIRTUAL_NOTE",
    "CallPage",
    "render_call_page",
    "write_call_page",
    "write_suite_index",
]

WIDTH = 1100  # px of the time axis
LEFT = 120  # px for lane labels
LANE = 34
COLORS = {
    "callee": "#4a90d9",
    "agent": "#2e9e4f",
    "vad": "#9aa5b1",
    "allow": "#2e9e4f",
    "steer": "#e08a1e",
    "block": "#c0392b",
    "amd": "#8e44ad",
    "dtmf": "#16a085",
    "latency": "#e67e22",
}
#: one colour per latency stage, the same on every page (the legend names them)
STAGE_COLORS: dict[str, str] = {
    "vad": "#9aa5b1",
    "stt": "#4e79a7",
    "endpointing": "#f28e2b",
    "llm_request": "#e15759",
    "llm_first_token": "#b07aa1",
    "first_sentence": "#59a14f",
    "tts": "#edc948",
    "playout": "#76b7b2",
}
#: what each stage is charged with (legend tooltips)
STAGE_MEANINGS: dict[str, str] = {
    "vad": "end of the callee's audio to the VAD's end of speech",
    "stt": "to the final transcript",
    "endpointing": "to the turn being committed (end-of-turn delay)",
    "llm_request": "to the LLM request being sent",
    "llm_first_token": "to the LLM's first token",
    "first_sentence": "to the first sentence released to TTS",
    "tts": "to TTS's first audio",
    "playout": "to the agent's first audio on the line",
}
#: how figures from a virtual clock are labelled: models take no time there
VIRTUAL_NOTE = "virtual clock: model time not shown"


class CallPage:
    """What one call's page shows, gathered from its messages and result.

    Args:
        result: the judged result (turns, AMD, guardrail evaluations).
        messages: every message the call published, in order.
        played: the callee's segments, (payload, start, end) after the answer.
        amd_delay: AMD's decision time after the callee line it followed.
        recording: the stereo recording (WAV file), if the call was recorded.
        title: the page's heading (default: the call's name), e.g. a campaign call's
            campaign, masked contact and attempt; the call's name then follows it.
    """

    def __init__(
        self,
        result: CallResult,
        messages: Sequence[object],
        *,
        played: Sequence[tuple[str, float, float]] = (),
        amd_delay: float | None = None,
        recording: Path | None = None,
        title: str | None = None,
    ) -> None:
        self.result = result
        self.title = title
        self.messages = list(messages)
        self.played = list(played)
        self.amd_delay = amd_delay
        self.recording = recording if recording is not None and recording.exists() else None
        answered = next((m for m in self.messages if isinstance(m, CallAnswered)), None)
        started = next((m for m in self.messages if isinstance(m, CallStarted)), None)
        self.direction = started.direction if started is not None else "outbound"
        self.t0 = answered.at if answered is not None else 0.0
        ends = [result.duration] + [t.end for t in result.turns] + [e for _, _, e in self.played]
        self.span = max(max(ends), 1.0)

    @classmethod
    def of(
        cls, replayed: ReplayedCall, recording: Path | None = None, *, title: str | None = None
    ) -> CallPage:
        """The page of a replayed call (``recording``: its stereo WAV, if it was recorded)."""
        return cls(
            replayed.result,
            replayed.messages,
            played=replayed.played,
            amd_delay=replayed.amd_delay,
            recording=recording,
            title=title,
        )

    @property
    def amd_shown(self) -> str:
        """AMD's verdict as the page shows it: not applicable on an inbound call."""
        if self.direction == "inbound":
            return "n/a (inbound)"
        return self.result.amd.category if self.result.amd else "-"

    def rel(self, at: float) -> float:
        """A message's loop time as seconds after the answer."""
        return at - self.t0

    def x(self, t: float) -> float:
        return LEFT + max(0.0, min(t, self.span)) / self.span * WIDTH


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _waveforms(page: CallPage) -> tuple[str, str]:
    """The two channels' peak envelopes as SVG, and the recording as a data URI."""
    if page.recording is None:
        return (
            f'<text x="{LEFT}" y="20" class="note">no recording '
            "(a text-only replay: speech went as transcripts)</text>",
            "",
        )
    import soundfile as sf
    import soxr

    data, rate = sf.read(str(page.recording), dtype="float32", always_2d=True)
    parts = []
    for ch, (name, y0) in enumerate((("callee", 4), ("agent", 4 + LANE + 8))):
        samples = data[:, min(ch, data.shape[1] - 1)]
        bins = max(1, WIDTH // 2)
        seconds = len(samples) / rate
        if len(samples) == 0:
            continue
        usable = min(1.0, seconds / page.span)
        per = max(1, int(len(samples) / (bins * usable)) if usable > 0 else 1)
        peaks = np.abs(samples[: per * (len(samples) // per)]).reshape(-1, per).max(axis=1)
        scale = (LANE - 4) / 2 / max(float(peaks.max(initial=0.0)), 1e-6)
        mid = y0 + LANE / 2
        step = WIDTH * (per / rate) / page.span
        path = " ".join(
            f"M{LEFT + i * step:.1f},{mid - p * scale:.1f}V{mid + p * scale:.1f}"
            for i, p in enumerate(peaks)
        )
        parts.append(
            f'<text x="4" y="{mid + 4}" class="label">{name} audio</text>'
            f'<path d="{path}" stroke="{COLORS[name]}" stroke-width="1" class="wave"/>'
        )
    # an 8 kHz copy keeps the page small; both channels, as recorded
    low = soxr.resample(data, rate, 8000) if rate != 8000 else data
    buf = io.BytesIO()
    sf.write(buf, np.clip(low, -1, 1), 8000, format="WAV", subtype="PCM_16")
    uri = "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return "".join(parts), uri


@dataclass(frozen=True)
class _Mark:
    """One item of a lane: its shapes and tooltip, and the label it would like."""

    cls: str
    body: str
    label: Label
    #: the label's baseline below the lane's top, and its text class
    baseline: float = LANE / 2 + 4
    text_cls: str = "span"

    def svg(self, y: float, placed: Placed) -> str:
        text = (
            f'<text x="{placed.x:.1f}" y="{y + self.baseline}" class="{self.text_cls}">'
            f"{_esc(placed.text)}</text>"
            if placed.text
            else ""
        )
        return f'<g class="{self.cls}">{self.body}{text}</g>'


def _span(
    page: CallPage, y: float, start: float, end: float, color: str, label: str, title: str, cls: str
) -> _Mark:
    x0, x1 = page.x(start), page.x(max(end, start + 0.05))
    body = (
        f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 2):.1f}" '
        f'height="{LANE - 6}" fill="{color}" fill-opacity="0.25" stroke="{color}"/>'
        f"<title>{_esc(title)}</title>"
    )
    return _Mark(cls, body, Label(x0 + 3, label))


def _tick(
    page: CallPage, y: float, t: float, color: str, title: str, cls: str, label: str = ""
) -> _Mark:
    x = page.x(t)
    body = (
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y + 2}" y2="{y + LANE - 2}" '
        f'stroke="{color}" stroke-width="2"/><title>{_esc(title)}</title>'
    )
    return _Mark(cls, body, Label(x + 3, label), baseline=12, text_cls="tick")


def _lanes(page: CallPage) -> tuple[str, int]:
    """Every event lane as SVG rows below the waveforms; returns (svg, height)."""
    rows: list[tuple[str, list[tuple[Any, ...]]]] = []
    msgs = page.messages
    vad: list[tuple[Any, ...]] = []
    started: float | None = None
    for m in msgs:
        if isinstance(m, UserSpeechStarted):
            started = page.rel(m.at)
        elif isinstance(m, UserSpeechStopped) and started is not None:
            vad.append(("vad", started, page.rel(m.at)))
            started = None
    blocked = {
        (m.run_id, m.index)
        for m in msgs
        if isinstance(m, GuardrailEvaluated)
        and m.hook == "on_agent_sentence"
        and m.action == "block"
    }
    turns = page.result.turns
    rows.append(("VAD", vad))
    rows.append(("callee", [("callee-turn", t) for t in turns if t.role == "callee"]))
    rows.append(("agent", [("agent-turn", t) for t in turns if t.role == "agent"]))
    rows.append(
        (
            "sentences",
            [
                ("sentence", m, (m.run_id, m.index) in blocked)
                for m in msgs
                if isinstance(m, AgentSentence)
            ],
        )
    )
    amd_kinds = (AmdPrediction, AmdCompleted, AmdTone)
    rows.append(("AMD", [("amd", m) for m in msgs if isinstance(m, amd_kinds)]))
    rows.append(("guardrail", [("guard", m) for m in msgs if isinstance(m, GuardrailEvaluated)]))
    dtmf_kinds = (DtmfSent, DtmfReceived)
    rows.append(("DTMF", [("dtmf", m) for m in msgs if isinstance(m, dtmf_kinds)]))
    rows.append(("barge-in", [("barge", m) for m in msgs if isinstance(m, InterruptRun)]))
    rows.append(("latency", list(_latency_items(page))))

    out: list[str] = []
    y = 0.0
    for label, items in rows:
        out.append(f'<text x="4" y="{y + LANE / 2 + 4}" class="label">{_esc(label)}</text>')
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + WIDTH}" y1="{y + LANE}" y2="{y + LANE}" class="grid"/>'
        )
        # one lane's labels are laid out together: none overlaps another or the edge
        marks = [mark for item in items if (mark := _item(page, y, item)) is not None]
        placed = place_labels([m.label for m in marks], right=LEFT + WIDTH + 18)
        out.extend(mark.svg(y, where) for mark, where in zip(marks, placed, strict=True))
        y += LANE
    return "".join(out), int(y)


def _breakdowns(page: CallPage) -> list[tuple[Turn, TurnLatencyResult]]:
    """Each answered callee turn that carries its per-stage latency, in order."""
    return [
        (t, t.latency) for t in page.result.turns if t.role == "callee" and t.latency is not None
    ]


def _latency_items(page: CallPage) -> list[tuple[Any, ...]]:
    """The latency lane: a stacked bar per turn breakdown, a plain span per other answered line.

    A bar runs from the turn's origin to its first audio (``first_audio`` minus ``total``).
    A callee line answered by :func:`answered_lines` whose reply no bar ends at (a result
    without breakdowns) keeps the plain span: end of its audio to the agent's next audio.
    """
    items: list[tuple[Any, ...]] = []
    ends: list[float] = []
    for turn, lat in _breakdowns(page):
        end = lat.milestones.get("first_audio")
        if end is not None:
            items.append(("stages", turn, lat, end - lat.total, end))
            ends.append(end)
    starts = [page.rel(m.at) for m in page.messages if isinstance(m, AgentSpeechStarted)]
    for end, reply in answered_lines(page.played, starts):
        if not any(abs(reply - e) < 0.05 for e in ends):
            items.append(("latency", end, reply))
    return items


def _responses(page: CallPage) -> tuple[list[float], bool]:
    """Every answered turn's response time, sorted, and whether any was on a virtual clock."""
    breakdowns = [lat for _, lat in _breakdowns(page)]
    seconds = [lat.total for lat in breakdowns]
    seconds += [i[2] - i[1] for i in _latency_items(page) if i[0] == "latency"]
    return sorted(seconds), any(lat.clock == "virtual" for lat in breakdowns)


def _stage_bar(
    page: CallPage, y: float, turn: Turn, lat: TurnLatencyResult, start: float, end: float
) -> _Mark:
    """One turn's response as segments in stage order; each as wide as its seconds."""
    virtual = lat.clock == "virtual"
    parts = []
    t = start
    for stage in LATENCY_STAGES:
        seconds = lat.stages.get(stage, 0.0)
        if seconds <= 0:
            continue
        x0, x1 = page.x(t), page.x(t + seconds)
        parts.append(
            f'<rect class="stage {stage}" data-seconds="{seconds:.4f}" x="{x0:.3f}" '
            f'y="{y + 5}" width="{x1 - x0:.3f}" height="{LANE - 10}" '
            f'fill="{STAGE_COLORS[stage]}"/>'
        )
        t += seconds
    x0, x1 = page.x(start), page.x(end)
    lines = [f"callee turn at {turn.start:.2f} s answered in {lat.total:.3f} s"]
    if virtual:
        lines.append(VIRTUAL_NOTE)
    lines += [f"{stage}: {lat.stages.get(stage, 0.0):.3f} s" for stage in LATENCY_STAGES]
    lines.append(f"total: {lat.total:.3f} s")
    if lat.preemptive:
        lines.append("reply generated preemptively")
    if lat.prompt_tokens is not None:
        lines.append(f"prompt tokens: {lat.prompt_tokens} ({lat.cached_tokens or 0} cached)")
    label = f"{lat.total:.2f}s" + (" virtual" if virtual else "")
    cls = "stages virtual" if virtual else "stages"
    body = (
        f'<rect class="bar" x="{x0:.3f}" y="{y + 4}" '
        f'width="{max(x1 - x0, 2):.3f}" height="{LANE - 8}" fill="none" stroke="#555"/>'
        f"{''.join(parts)}<title>{_esc(chr(10).join(lines))}</title>"
    )
    return _Mark(cls, body, Label(max(x1, x0 + 2) + 3, label))


def _legend() -> str:
    swatches = "".join(
        f'<span class="stage-key" title="{_esc(STAGE_MEANINGS[s])}">'
        f'<span class="swatch" style="background:{STAGE_COLORS[s]}"></span>{s}</span>'
        for s in LATENCY_STAGES
    )
    return f'<p class="legend">response stages: {swatches}</p>'


def _stages_table(page: CallPage) -> str:
    """One row per answered turn with a breakdown: seconds per stage and the total."""
    head = "".join(f"<th>{s} (s)</th>" for s in LATENCY_STAGES)
    rows = []
    for turn, lat in _breakdowns(page):
        cells = "".join(f"<td>{lat.stages.get(s, 0.0):.3f}</td>" for s in LATENCY_STAGES)
        tokens = (
            "-" if lat.prompt_tokens is None else f"{lat.prompt_tokens} ({lat.cached_tokens or 0})"
        )
        clock = "virtual" if lat.clock == "virtual" else "wall"
        rows.append(
            f'<tr class="stage-row {clock}"><td>{turn.start:.2f}</td><td>{clock}</td>{cells}'
            f"<td>{lat.total:.3f}</td><td>{'yes' if lat.preemptive else 'no'}</td>"
            f"<td>{tokens}</td></tr>"
        )
    return (
        '<table class="stages"><tr><th>callee turn at</th><th>clock</th>'
        f"{head}<th>total (s)</th><th>preemptive</th><th>prompt tokens (cached)</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _item(page: CallPage, y: float, item: tuple[Any, ...]) -> _Mark | None:
    kind = item[0]
    if kind == "vad":
        return _span(page, y, item[1], item[2], COLORS["vad"], "", "speech (VAD)", "vad")
    if kind in ("callee-turn", "agent-turn"):
        t = item[1]
        role = "callee" if kind == "callee-turn" else "agent"
        cut = " (interrupted)" if t.interrupted else ""
        title = f"{role} {t.start:.2f}-{t.end:.2f} s{cut}: {t.text}"
        color = COLORS["block"] if t.interrupted else COLORS[role]
        return _span(page, y, t.start, t.end, color, t.text, title, f"turn {role}")
    if kind == "sentence":
        m, is_blocked = item[1], item[2]
        color = COLORS["block"] if is_blocked else COLORS["agent"]
        state = "blocked" if is_blocked else "spoken"
        return _tick(
            page,
            y,
            page.rel(m.at),
            color,
            f"sentence {m.index} ({state}): {m.text}",
            f"sentence {state}",
        )
    if kind == "amd":
        m = item[1]
        if isinstance(m, AmdTone):
            return _span(page, y, m.start, m.end, COLORS["amd"], m.tone, f"{m.tone} tone", "amd")
        if isinstance(m, AmdCompleted):
            return _tick(
                page,
                y,
                page.rel(m.at),
                COLORS["amd"],
                f"AMD final: {m.category} ({m.reason})",
                "amd final",
                m.category,
            )
        changed = " (stage changed)" if m.changed else ""
        return _tick(
            page,
            y,
            page.rel(m.at),
            COLORS["amd"],
            f"AMD {m.category} stage {m.stage} conf {m.confidence:.2f}{changed}: {m.reason}",
            "amd",
            m.stage if m.changed else "",
        )
    if kind == "guard":
        m = item[1]
        values = ", ".join(f"{k}={v}" for k, v in m.decisions.items())
        return _tick(
            page,
            y,
            page.rel(m.at),
            COLORS.get(m.action, "#555"),
            f"{m.hook}: {m.action} in {m.latency * 1000:.0f} ms; {values}",
            f"guardrail {m.action}",
        )
    if kind == "dtmf":
        m = item[1]
        who = "agent sent" if isinstance(m, DtmfSent) else "callee pressed"
        return _tick(page, y, page.rel(m.at), COLORS["dtmf"], f"{who} {m.digits}", "dtmf", m.digits)
    if kind == "barge":
        m = item[1]
        return _tick(
            page, y, page.rel(m.at), COLORS["block"], f"barge-in: run {m.run_id} cut", "barge"
        )
    if kind == "stages":
        return _stage_bar(page, y, *item[1:])
    if kind == "latency":
        _, s, e = item
        return _span(
            page,
            y,
            s,
            e,
            COLORS["latency"],
            f"{e - s:.2f}s",
            f"end of callee speech to first agent audio: {e - s:.2f} s",
            "latency",
        )
    return None


def _axis(page: CallPage, y: int) -> str:
    step = next(s for s in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600) if page.span / s <= 14)
    out = []
    t = 0.0
    while t <= page.span + 1e-9:
        x = page.x(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{y}" class="tickline"/>'
            f'<text x="{x:.1f}" y="{y + 14}" class="axis">{t:g}s</text>'
        )
        t += step
    return "".join(out)


def render_call_page(page: CallPage) -> str:
    """The call's page as one HTML document."""
    r = page.result
    waves, audio = _waveforms(page)
    wave_height = 2 * LANE + 16
    lanes, lanes_height = _lanes(page)
    height = wave_height + lanes_height + 24
    axis = _axis(page, wave_height + lanes_height)
    status = "ok" if r.ok else "FAIL: " + ", ".join(f.key for f in r.failures)
    amd = page.amd_shown
    measured, virtual = _responses(page)
    p50 = f"{measured[len(measured) // 2]:.2f} s" if measured else "-"
    if virtual:
        p50 += f' <span class="virtual">({VIRTUAL_NOTE})</span>'
    breakdowns = _breakdowns(page)
    legend = _legend() if breakdowns else ""
    stages_note = (
        f'<p class="note">{VIRTUAL_NOTE}: only configured waits (endpointing, playout) show.</p>'
        if virtual
        else ""
    )
    amd_delay = f"{page.amd_delay:.2f} s" if page.amd_delay is not None else "-"
    turns_rows = "".join(
        f'<tr class="turn-row {t.role}"><td>{t.role}</td><td>{t.start:.2f}</td><td>{t.end:.2f}</td>'
        f"<td>{'interrupted' if t.interrupted else ''}</td><td>{_esc(t.text)}</td></tr>"
        for t in r.turns
    )
    guard_rows = "".join(
        f"<tr><td>{g.at:.2f}</td><td>{g.hook}</td><td>{g.action}</td>"
        f"<td>{g.latency * 1000:.0f} ms</td><td>{_esc(json.dumps(g.decisions))}</td></tr>"
        for g in r.guardrail
    )
    player = (
        f'<audio id="player" controls preload="metadata" src="{audio}"></audio>'
        if audio
        else "<p class='note'>no recording</p>"
    )
    playhead = (
        f'<line id="playhead" x1="{LEFT}" x2="{LEFT}" y1="0" y2="{height - 24}" '
        'stroke="#000" stroke-width="1"/>'
        if audio
        else ""
    )
    script = (
        "<script>\n(function(){var a=document.getElementById('player'),"
        "h=document.getElementById('playhead');if(!a||!h)return;"
        f"a.addEventListener('timeupdate',function(){{var x={LEFT}+"
        f"Math.min(a.currentTime/{page.span:.3f},1)*{WIDTH};"
        "h.setAttribute('x1',x);h.setAttribute('x2',x);});})();\n</script>"
        if audio
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{_esc(page.title or f"call {r.name}")}</title>
<style>
body{{font:14px system-ui,sans-serif;margin:20px;color:#222}}
table{{border-collapse:collapse;margin:8px 0}} td,th{{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}} .label{{font-size:11px;fill:#333}}
.span{{font-size:10px;fill:#111}} .tick{{font-size:10px;fill:#333}}
.axis{{font-size:10px;fill:#555;text-anchor:middle}} .grid{{stroke:#eee}}
.tickline{{stroke:#f3f3f3}} .note{{font-size:12px;fill:#777;color:#777}}
.ok{{color:#2e9e4f}} .fail{{color:#c0392b}} .virtual{{color:#8a5a00}}
.legend{{font-size:12px}} .stage-key{{margin-right:10px;white-space:nowrap}}
.swatch{{display:inline-block;width:12px;height:12px;margin-right:3px;vertical-align:-2px}}
</style></head><body>
<h1>{_esc(page.title or r.name)}</h1>
{f'<p class="note">recorded call {_esc(r.name)}</p>' if page.title else ""}
<p class="{"ok" if r.ok else "fail"}">{_esc(status)}</p>
<table class="figures">
<tr><th>disposition</th><td>{_esc(r.disposition)}</td><th>AMD</th><td>{_esc(amd)}</td></tr>
<tr><th>duration</th><td>{r.duration:.2f} s</td><th>AMD decision after the callee line</th>
<td>{amd_delay}</td></tr>
<tr><th>turns</th><td>{len(r.turns)}</td><th>end of callee speech to agent audio (p50)</th>
<td>{p50}</td></tr>
<tr><th>voicemail left</th><td>{"yes" if r.voicemail_left else "no"}</td><th>DTMF sent</th>
<td>{_esc(r.dtmf_sent or "-")}</td></tr>
</table>
{player}
<svg width="{LEFT + WIDTH + 20}" height="{height}" role="img" aria-label="call timeline">
{axis}<g>{waves}</g><g transform="translate(0,{wave_height})">{lanes}</g>{playhead}
</svg>
{legend}
<h2>Turns</h2>
<table class="turns"><tr><th>role</th><th>start</th><th>end</th><th>note</th><th>text</th></tr>
{turns_rows}</table>
<h2>Guardrail evaluations</h2>
<table class="guardrail"><tr><th>at</th><th>hook</th><th>action</th><th>latency</th>
<th>values</th></tr>{guard_rows}</table>
<h2>Response stages</h2>
<p class="note">Seconds each stage added between the end of the callee turn and the agent's first
audio; the stages sum to the total.</p>
{stages_note}{_stages_table(page)}
{script}
</body></html>
"""


def write_call_page(out_dir: Path, name: str, page: CallPage) -> Path:
    """Write ``out_dir/calls/<name>.html``; returns its path."""
    folder = out_dir / "calls"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_safe_name(name)}.html"
    path.write_text(render_call_page(page), encoding="utf-8")
    return path


def write_suite_index(out_dir: Path, pages: Sequence[tuple[Path, CallPage]]) -> Path:
    """Write ``out_dir/index.html``: every call with pass/fail and its key figures."""
    rows = []
    for path, page in pages:
        r = page.result
        lat, virtual = _responses(page)
        p50 = "virtual" if virtual else f"{lat[len(lat) // 2]:.2f}" if lat else "-"
        mark = "ok" if r.ok else "FAIL"
        failed = ", ".join(f.key for f in r.failures)
        rows.append(
            f'<tr class="call {"ok" if r.ok else "fail"}">'
            f'<td><a href="{_esc(path.relative_to(out_dir).as_posix())}">{_esc(r.name)}</a></td>'
            f'<td class="{"ok" if r.ok else "fail"}">{mark} {_esc(failed)}</td>'
            f"<td>{_esc(r.disposition)}</td><td>{_esc(page.amd_shown)}</td>"
            f"<td>{len(r.turns)}</td><td>{r.duration:.1f}</td><td>{p50}</td>"
            f"<td>{'-' if page.amd_delay is None else f'{page.amd_delay:.2f}'}</td></tr>"
        )
    passed = sum(1 for _, p in pages if p.result.ok)
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>replay report</title>
<style>body{{font:14px system-ui,sans-serif;margin:20px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ddd;padding:3px 8px;text-align:left}} .ok{{color:#2e9e4f}}
.fail{{color:#c0392b}}</style></head><body>
<h1>Replay report</h1><p>{passed} of {len(pages)} calls met their expectations.</p>
<table><tr><th>call</th><th>result</th><th>disposition</th><th>AMD</th><th>turns</th>
<th>duration (s)</th><th>response p50 (s)</th><th>AMD decision (s)</th></tr>
{"".join(rows)}</table></body></html>
"""
    out_dir.mkdir(parents=True, exist_ok=True)
    index = out_dir / "index.html"
    index.write_text(body, encoding="utf-8")
    return index


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "call"
