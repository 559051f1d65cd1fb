"""Campaign report: ``attempts.csv`` and one self-contained ``report.html``.

:func:`write_report` renders both files from a :class:`CampaignSummary` and its
:class:`AttemptRecord` rows before touching the disk, then writes each under a
temporary name in the output folder and renames it into place, so a failure
never leaves a half-written report. The files are created owner-only (0600):
the CSV holds whole phone numbers.

The CSV keeps numbers whole because operators need them; the HTML masks them
with :func:`agent.telephony.phone.mask_number`. Spreadsheets read cells starting with
``=``, ``+``, ``-`` or ``@`` as formulas. The only such cells here are E.164
numbers (``+`` and digits, checked when contacts are imported), which are data
and stay unprefixed; every other column is an id, a time, a number or a fixed
word. A free-text column added later must be prefixed with ``'``.

The page loads nothing and runs no script: CSS is inline, the three charts are
inline SVG built here, and every bar carries a ``<title>`` with its exact count.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import statistics
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path
from urllib.parse import quote

from agent.campaigns.records import AttemptRecord, CampaignSummary
from agent.telephony.phone import mask_number

__all__ = [
    "CSV_HEADER",
    "Figures",
    "amd_chart",
    "bucket_size",
    "csv_rows",
    "dispositions_chart",
    "figures",
    "handle_time_chart",
    "render_html",
    "write_report",
]

CSV_HEADER = (
    "attempt_id,contact_id,contact_line,number,attempt_no,dialer,started_at,ended_at,status,"
    "disposition,voicemail_left,amd_category,duration,call_id,transcript_path,recording_path"
).split(",")
#: The HTML table shows at most this many attempts (the newest).
TABLE_LIMIT = 500
#: The dispositions chart has at most this many time buckets.
MAX_BUCKETS = 48
NOT_ANSWERED = "not answered"

DISPOSITION_COLOURS = {
    "completed": "#2e9d4a",
    "voicemail": "#4a90d9",
    "voicemail-left": "#1f5fa8",
    "busy": "#f28e2b",
    "no-answer": "#9e9e9e",
    "failed": "#d62728",
    "error": "#e8575a",
    "rejected": "#8b0000",
    "unavailable": "#8e44ad",
    "transferred": "#17a2a2",
    "abandoned": "#000000",
}
AMD_COLOURS = {
    "human": "#2e9d4a",
    "machine-vm": "#4a90d9",
    "machine-unavailable": "#8e44ad",
    "machine-ivr": "#1f5fa8",
    "machine-screening": "#6fa8dc",
    "uncertain": "#e6b422",
    "wait": "#bcbd22",
    NOT_ANSWERED: "#9e9e9e",
}
# Names outside the maps get a colour by CRC32 of the name: stable across runs,
# unlike hash().
_EXTRA_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd", "#c49c94")
_BUCKET_STEPS = tuple(timedelta(minutes=m) for m in (1, 5, 15, 30, 60, 120, 360, 720, 1440))
_HISTOGRAM_WIDTHS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
_HISTOGRAM_MAX_BINS = 20
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
# Geometry of the two column charts: margins and plot area, in pixels.
_WIDTH, _LEFT, _TOP, _PLOT_W, _PLOT_H = 720, 44, 12, 660, 180


def _utc(value: datetime) -> datetime:
    # Naive times are taken as UTC rather than as local time.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _iso(value: datetime | None) -> str:
    return "" if value is None else _utc(value).isoformat().replace("+00:00", "Z")


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _finished(attempts: Iterable[AttemptRecord]) -> list[AttemptRecord]:
    return [a for a in attempts if a.status != "dialing"]


def _outcome(attempt: AttemptRecord) -> str:
    if attempt.disposition:
        return attempt.disposition
    return "abandoned" if attempt.status == "abandoned" else "unknown"


def _colour(name: str, known: dict[str, str]) -> str:
    return known.get(name) or _EXTRA_COLOURS[zlib.crc32(name.encode()) % len(_EXTRA_COLOURS)]


def _ordered(names: Iterable[str], order: Iterable[str]) -> list[str]:
    present = set(names)
    known = [n for n in order if n in present]
    return known + sorted(present - set(known))


def csv_rows(attempts: Sequence[AttemptRecord]) -> list[list[str]]:
    """The rows of ``attempts.csv`` below :data:`CSV_HEADER`, oldest first.

    Args:
        attempts: the campaign's attempts, in any order.

    Returns:
        One list of cells per attempt, ordered by start time then attempt id:
        ISO-8601 UTC times ending in ``Z``, ``""`` for None, durations to
        0.001 s, booleans as ``true``/``false``, numbers whole.
    """
    ordered = sorted(attempts, key=lambda a: (_utc(a.started_at), a.attempt_id))
    return [[_cell(name, getattr(a, name)) for name in CSV_HEADER] for a in ordered]


def _cell(name: str, value: object) -> str:
    match value:
        case None:
            return ""
        case bool():
            return "true" if value else "false"
        case datetime():
            return _iso(value)
        case int() | float() if name == "duration":
            return f"{value:.3f}"
    return str(value)


@dataclass(frozen=True)
class Figures:
    """The headline numbers of a report; None where there is nothing to measure.

    Attributes:
        finished: attempts no longer in flight (done or abandoned).
        done: attempts that ended with a recorded call.
        answered: done attempts that were answered (an AMD category or a
            positive duration).
        answered_rate: ``answered / done``.
        median_handle: median duration of answered calls, in seconds.
        p90_handle: 90th percentile of the same (linear interpolation).
        first_dial_at: the summary's first dial, else the earliest start.
        last_end_at: the summary's last end, else the latest end.
        span: ``last_end_at - first_dial_at``.
        dials_per_hour: attempt records per hour of ``span``.
    """

    finished: int
    done: int
    answered: int
    answered_rate: float | None
    median_handle: float | None
    p90_handle: float | None
    first_dial_at: datetime | None
    last_end_at: datetime | None
    span: timedelta | None
    dials_per_hour: float | None


def _percentile(ordered: Sequence[float], q: float) -> float:
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _handle_times(attempts: Iterable[AttemptRecord]) -> list[float]:
    return sorted(a.duration for a in _finished(attempts) if a.duration and a.duration > 0)


def figures(summary: CampaignSummary, attempts: Sequence[AttemptRecord]) -> Figures:
    """Compute the report's headline numbers.

    Args:
        summary: the campaign's summary (its first dial / last end win when set).
        attempts: all attempts of the campaign.

    Returns:
        The :class:`Figures`.
    """
    finished = _finished(attempts)
    done = [a for a in finished if a.status == "done"]
    answered = [a for a in done if a.amd_category is not None or (a.duration or 0) > 0]
    handle = _handle_times(attempts)
    first = summary.first_dial_at or min((a.started_at for a in attempts), default=None, key=_utc)
    ends = [a.ended_at for a in attempts if a.ended_at is not None]
    last = summary.last_end_at or max(ends, default=None, key=_utc)
    first, last = (_utc(first) if first else None), (_utc(last) if last else None)
    span = last - first if first and last and last >= first else None
    hours = span.total_seconds() / 3600 if span else 0.0
    return Figures(
        finished=len(finished),
        done=len(done),
        answered=len(answered),
        answered_rate=len(answered) / len(done) if done else None,
        median_handle=statistics.median(handle) if handle else None,
        p90_handle=_percentile(handle, 0.9) if handle else None,
        first_dial_at=first,
        last_end_at=last,
        span=span,
        dials_per_hour=len(attempts) / hours if hours > 0 else None,
    )


def bucket_size(span: timedelta) -> timedelta:
    """The time bucket of the dispositions chart for a span of end times.

    Picks the smallest of 1, 5, 15, 30 min, 1, 2, 6, 12 h, 1 day (then whole
    days) that covers ``span`` in at most :data:`MAX_BUCKETS` buckets aligned
    to the step (hence ``span / step <= MAX_BUCKETS - 1``).
    """
    limit = MAX_BUCKETS - 1
    for step in _BUCKET_STEPS:
        if span <= step * limit:
            return step
    return timedelta(days=math.ceil(span / (timedelta(days=1) * limit)))


def _count_ticks(maximum: int) -> list[int]:
    raw = max(maximum, 1) / 4
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = max(1, int(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)))
    return list(range(0, math.ceil(max(maximum, 1) / step) * step + 1, step))


def _svg(title: str, height: int, body: list[str]) -> str:
    return (
        f'<svg viewBox="0 0 {_WIDTH} {height}" '
        f'width="{_WIDTH}" height="{height}" role="img" aria-label="{_e(title)}" '
        'font-family="sans-serif" font-size="11">' + "".join(body) + "</svg>"
    )


def _empty_svg(title: str, message: str) -> str:
    text = f'<text x="{_WIDTH // 2}" y="34" text-anchor="middle" fill="#666">{_e(message)}</text>'
    return _svg(title, 60, [text])


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str) -> str:
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}">'
        f"<title>{_e(tip)}</title></rect>"
    )


def _y_axis(ticks: list[int], left: int, top: int, width: int, height: int) -> list[str]:
    parts = []
    for t in ticks:
        y = top + height - height * t / ticks[-1]
        parts.append(
            f'<line x1="{left}" x2="{left + width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t}</text>'
        )
    parts.append(
        f'<line x1="{left}" x2="{left + width}" y1="{top + height}" y2="{top + height}" '
        'stroke="#444"/>'
    )
    return parts


def _axis_titles(x_title: str, y_title: str) -> str:
    x, y = _LEFT + _PLOT_W // 2, _TOP + _PLOT_H // 2
    return (
        f'<text x="{x}" y="{_TOP + _PLOT_H + 30}" text-anchor="middle">{_e(x_title)}</text>'
        f'<text transform="translate(12 {y}) rotate(-90)" text-anchor="middle">{_e(y_title)}</text>'
    )


def _floor(moment: datetime, step: timedelta) -> datetime:
    return _EPOCH + ((moment - _EPOCH) // step) * step


def _time_label(moment: datetime, step: timedelta, span: timedelta) -> str:
    if step >= timedelta(days=1):
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%m-%d %H:%M" if span > timedelta(days=2) else "%H:%M")


def dispositions_chart(attempts: Sequence[AttemptRecord]) -> str:
    """Stacked bars of finished attempts by disposition per time bucket.

    Attempts are bucketed by when they ended (their start when no end is
    known); abandoned attempts count as ``abandoned``. Each bar segment's
    ``<title>`` reads ``"<bucket start> UTC, <disposition>: <count>"``.
    """
    title = "Dispositions over time"
    finished = [(_utc(a.ended_at or a.started_at), _outcome(a)) for a in _finished(attempts)]
    if not finished:
        return _empty_svg(title, "no finished attempts yet")
    start, end = min(t for t, _ in finished), max(t for t, _ in finished)
    step = bucket_size(end - start)
    first = _floor(start, step)
    buckets: list[Counter[str]] = [
        Counter() for _ in range((_floor(end, step) - first) // step + 1)
    ]
    for moment, outcome in finished:
        buckets[(moment - first) // step][outcome] += 1
    kinds = _ordered((o for _, o in finished), DISPOSITION_COLOURS)
    left, top, plot_w, plot_h = _LEFT, _TOP, _PLOT_W, _PLOT_H
    ticks = _count_ticks(max(sum(b.values()) for b in buckets))
    slot = plot_w / len(buckets)
    bar_w = min(40.0, max(1.0, slot * 0.8))
    body = _y_axis(ticks, left, top, plot_w, plot_h)
    label_every = math.ceil(len(buckets) / 8)
    for i, counts in enumerate(buckets):
        x = left + i * slot + (slot - bar_w) / 2
        base = float(top + plot_h)
        label = _time_label(first + i * step, step, end - start)
        for kind in kinds:
            if counts[kind]:
                h = plot_h * counts[kind] / ticks[-1]
                base -= h
                tip = f"{label} UTC, {kind}: {counts[kind]}"
                body.append(_rect(x, base, bar_w, h, _colour(kind, DISPOSITION_COLOURS), tip))
        if i % label_every == 0:
            body.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 14}" '
                f'text-anchor="middle">{_e(label)}</text>'
            )
    body.append(
        _axis_titles(f"end time (UTC), {_fmt_duration(step / _SECOND)} buckets", "attempts")
    )
    x, y = float(left), top + plot_h + 50
    for kind in kinds:
        width = 24 + 7 * len(kind)
        if x + width > _WIDTH:
            x, y = float(left), y + 18
        body.append(
            f'<rect x="{x:.0f}" y="{y - 9}" width="10" height="10" '
            f'fill="{_colour(kind, DISPOSITION_COLOURS)}"/>'
            f'<text x="{x + 14:.0f}" y="{y}">{_e(kind)}</text>'
        )
        x += width
    return _svg(title, y + 10, body)


def amd_chart(attempts: Sequence[AttemptRecord]) -> str:
    """Horizontal bars: finished attempts per AMD category (None is "not answered")."""
    title = "AMD categories"
    counts = Counter(a.amd_category or NOT_ANSWERED for a in _finished(attempts))
    if not counts:
        return _empty_svg(title, "no finished attempts yet")
    kinds = [k for k in _ordered(counts, AMD_COLOURS) if k != NOT_ANSWERED]
    kinds += [NOT_ANSWERED] if NOT_ANSWERED in counts else []
    left, row, bar_max = 150, 22, _WIDTH - 150 - 60
    most = max(counts.values())
    body = []
    for i, kind in enumerate(kinds):
        y = 8 + i * row
        w = max(1.0, bar_max * counts[kind] / most)
        body.append(
            f'<text x="{left - 8}" y="{y + 14}" text-anchor="end">{_e(kind)}</text>'
            + _rect(left, y + 3, w, row - 6, _colour(kind, AMD_COLOURS), f"{kind}: {counts[kind]}")
            + f'<text x="{left + w + 6:.1f}" y="{y + 14}">{counts[kind]}</text>'
        )
    return _svg(title, 16 + len(kinds) * row, body)


def handle_time_chart(attempts: Sequence[AttemptRecord]) -> str:
    """Histogram of answered calls' durations (> 0 s), at most 20 bins of a round width."""
    title = "Handle time"
    handle = _handle_times(attempts)
    if not handle:
        return _empty_svg(title, "no answered calls")
    width = next(
        (w for w in _HISTOGRAM_WIDTHS if handle[-1] // w + 1 <= _HISTOGRAM_MAX_BINS),
        3600 * math.ceil(handle[-1] / 3600 / (_HISTOGRAM_MAX_BINS - 1)),
    )
    bins = Counter(int(d // width) for d in handle)
    n = max(bins) + 1
    left, top, plot_w, plot_h = _LEFT, _TOP, _PLOT_W, _PLOT_H
    ticks = _count_ticks(max(bins.values()))
    slot = plot_w / n
    body = _y_axis(ticks, left, top, plot_w, plot_h)
    label_every = math.ceil((n + 1) / 10)
    for i in range(n + 1):
        if i < n and bins[i]:
            h = plot_h * bins[i] / ticks[-1]
            tip = f"{_fmt_duration(i * width)} to {_fmt_duration((i + 1) * width)}: {bins[i]}"
            body.append(_rect(left + i * slot + 1, top + plot_h - h, slot - 2, h, "#4a90d9", tip))
        if i % label_every == 0:
            body.append(
                f'<text x="{left + i * slot:.1f}" y="{top + plot_h + 14}" '
                f'text-anchor="middle">{_fmt_duration(i * width)}</text>'
            )
    body.append(_axis_titles("handle time (answer to hang-up)", "calls"))
    return _svg(title, top + plot_h + 40, body)


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds % 1 else f"{seconds:.0f} s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days} d", f"{hours} h"] if days else [f"{hours} h", f"{minutes} min"]
    if not days and not hours:
        parts = [f"{minutes} min", f"{secs} s"]
    return " ".join(p for p in parts if not p.startswith("0 ")) or "0 s"


def _fmt_time(value: datetime | None) -> str:
    return "" if value is None else _utc(value).strftime("%Y-%m-%d %H:%M:%S")


def _counts(counts: dict[str, int]) -> str:
    if not counts:
        return "none yet"
    return ", ".join(f"{_e(k)} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def _href(path: str, out_dir: Path) -> str:
    # Relative paths are taken from the working directory, like the CLI that
    # wrote them; quoting makes "javascript:" or "http:" a plain relative path.
    try:
        target = os.path.relpath(os.path.abspath(path), os.path.abspath(out_dir))
    except ValueError:  # another drive on Windows
        target = path
    return _e(quote(Path(target).as_posix()))


def _links(attempt: AttemptRecord, out_dir: Path) -> str:
    # a simulated call's timeline page sits next to its transcript
    page = None
    if attempt.transcript_path:
        sibling = Path(attempt.transcript_path).with_suffix(".html")
        page = str(sibling) if sibling.exists() else None
    links = [
        f'<a href="{_href(path, out_dir)}">{kind}</a>'
        for kind, path in (
            ("timeline", page),
            ("transcript", attempt.transcript_path),
            ("rec", attempt.recording_path),
        )
        if path
    ]
    return " ".join(links)


def _row(a: AttemptRecord, out_dir: Path) -> str:
    duration = "" if a.duration is None else f"{a.duration:.1f} s"
    cells = [_fmt_time(a.started_at), a.attempt_id, f"{a.contact_id}:{a.contact_line}"]
    cells += [mask_number(a.number), a.attempt_no, a.dialer, a.status, a.disposition or ""]
    cells += ["yes" if a.voicemail_left else "", a.amd_category or "", duration, a.call_id or ""]
    tds = "".join(f"<td>{_e(cell)}</td>" for cell in cells)
    return f"<tr>{tds}<td>{_links(a, out_dir)}</td></tr>"


def _table(attempts: Sequence[AttemptRecord], out_dir: Path) -> str:
    if not attempts:
        return '<p class="empty">no attempts yet</p>'
    newest = sorted(attempts, key=lambda a: (_utc(a.started_at), a.attempt_id), reverse=True)
    shown = newest[:TABLE_LIMIT]
    note = ""
    if len(shown) < len(attempts):
        note = f'<p class="note">showing the newest {len(shown)} of {len(attempts)} attempts</p>'
    head = (
        "<tr><th>started (UTC)</th><th>attempt</th><th>contact</th><th>number</th><th>try</th>"
        "<th>dialer</th><th>status</th><th>disposition</th><th>VM left</th><th>AMD</th>"
        "<th>duration</th><th>call</th><th>files</th></tr>"
    )
    rows = "".join(_row(a, out_dir) for a in shown)
    return f"{note}<table><thead>{head}</thead><tbody>{rows}</tbody></table>"


_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:1.4em;margin-bottom:4px}h2{font-size:1.1em;margin-top:28px}
.meta,.note,.empty{color:#555}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dt{font-weight:600}table{border-collapse:collapse;font-size:12px}
th,td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;white-space:nowrap}
th{background:#f3f3f3;position:sticky;top:0}
"""


def render_html(summary: CampaignSummary, attempts: Sequence[AttemptRecord], out_dir: Path) -> str:
    """The whole ``report.html`` page: no scripts, no external resources.

    Args:
        summary: the campaign's summary.
        attempts: all attempts of the campaign.
        out_dir: where the page will live; file links are made relative to it.
    """
    f = figures(summary, attempts)
    rate = "n/a" if f.answered_rate is None else f"{f.answered_rate:.0%} ({f.answered} of {f.done})"
    pace = f"{f.dials_per_hour:.1f}" if f.dials_per_hour is not None else "n/a"
    span = _fmt_duration(None if f.span is None else f.span / _SECOND)
    name = _e(summary.name)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Campaign report: {name}</title><style>{_CSS}</style></head>
<body>
<h1>Campaign report: {name}</h1>
<p class="meta">status <b>{_e(summary.status)}</b>,
created {_e(_fmt_time(summary.created_at))} UTC</p>
<dl>
<dt>contacts</dt><dd>{summary.total_contacts} ({_counts(summary.contacts)})</dd>
<dt>attempts</dt><dd>{summary.attempts}, in flight {summary.in_flight}</dd>
<dt>results</dt><dd>{_counts(summary.results)}</dd>
<dt>dispositions</dt><dd>{_counts(summary.dispositions)}</dd>
<dt>figures</dt><dd>answered {rate}; handle time median {_fmt_duration(f.median_handle)},
p90 {_fmt_duration(f.p90_handle)}; first dial to last end {span}; {pace} dials per hour</dd>
</dl>
<h2>Dispositions over time</h2>
{dispositions_chart(attempts)}
<h2>AMD categories</h2>
{amd_chart(attempts)}
<h2>Handle time</h2>
{handle_time_chart(attempts)}
<h2>Attempts</h2>
{_table(attempts, out_dir)}
</body></html>
"""


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        # mkstemp makes the file owner-only; a report gets the usual permissions
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_report(
    out_dir: Path, summary: CampaignSummary, attempts: Sequence[AttemptRecord]
) -> tuple[Path, Path]:
    """Write ``attempts.csv`` and ``report.html`` into ``out_dir``, each atomically.

    An error leaves the previous file (or none), never a partial one or a temporary file.

    Args:
        out_dir: the folder to write to; created when missing.
        summary: the campaign's summary.
        attempts: all attempts of the campaign, in any order.

    Returns:
        ``(csv_path, html_path)``.

    Raises:
        OSError: ``out_dir`` cannot be created (e.g. it is a file) or written.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADER)
    writer.writerows(csv_rows(attempts))
    # "replace" so a stray lone surrogate in a name cannot fail the whole report.
    csv_data = buffer.getvalue().encode("utf-8", errors="replace")
    html_data = render_html(summary, attempts, out_dir).encode("utf-8", errors="replace")
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out_dir / "attempts.csv", out_dir / "report.html"
    _write_atomic(csv_path, csv_data)
    _write_atomic(html_path, html_data)
    return csv_path, html_path
