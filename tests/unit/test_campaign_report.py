"""Campaign report: the CSV operators open and the self-contained HTML page."""

from __future__ import annotations

import csv
import os
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent.campaigns import report
from agent.campaigns.records import AttemptRecord, CampaignSummary
from agent.campaigns.report import (
    CSV_HEADER,
    bucket_size,
    dispositions_chart,
    figures,
    render_html,
    write_report,
)
from agent.telephony.phone import mask_number

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
# disposition, AMD category, answered?
OUTCOMES = [
    ("completed", "human", True),
    ("voicemail", "machine-vm", True),
    ("busy", None, False),
    ("no-answer", None, False),
    ("unavailable", "machine-unavailable", True),
    ("failed", None, False),
    ("transferred", "human", True),
    ("rejected", None, False),
    ("error", "uncertain", True),
]
VOID = {"meta", "br", "img", "input", "link", "hr", "col", "wbr"}


def attempt(i: int, **changes: object) -> AttemptRecord:
    disposition, amd, answered = OUTCOMES[i % len(OUTCOMES)]
    started = T0 + timedelta(minutes=3 * i)
    duration = 5 + i * 7.3456 if answered else 0.0
    values: dict[str, object] = dict(
        attempt_id=1000 + i,
        contact_id=i // 2,
        contact_line=i // 2 + 2,
        number=f"+1555{i:07d}",
        attempt_no=i % 2 + 1,
        dialer=f"dialer-{i % 2}",
        started_at=started,
        ended_at=started + timedelta(seconds=20 + duration),
        status="done",
        disposition=disposition,
        voicemail_left=disposition == "voicemail",
        amd_category=amd,
        duration=duration,
        call_id=f"call_{i}",
    )
    values.update(changes)
    return AttemptRecord(**values)  # type: ignore[arg-type]


def campaign(n: int = 60) -> list[AttemptRecord]:
    """N attempts three minutes apart: mostly done, one abandoned, the last two dialing."""
    rows = [attempt(i) for i in range(n - 3)]
    rows.append(
        attempt(n - 3, status="abandoned", disposition=None, amd_category=None, duration=None)
    )
    rows += [
        attempt(
            i, status="dialing", ended_at=None, disposition=None, amd_category=None, duration=None
        )
        for i in (n - 2, n - 1)
    ]
    return rows


def summary(attempts: list[AttemptRecord], name: str = "Spring renewals") -> CampaignSummary:
    finished = [a for a in attempts if a.status != "dialing"]
    dispositions: dict[str, int] = {}
    for a in finished:
        if a.disposition:
            dispositions[a.disposition] = dispositions.get(a.disposition, 0) + 1
    return CampaignSummary(
        name=name,
        status="running",
        created_at=T0 - timedelta(hours=1),
        total_contacts=40,
        contacts={"pending": 5, "dialing": 2, "done": 33},
        results={"completed": 20, "voicemail-left": 6, "max-attempts": 7},
        dispositions=dispositions,
        attempts=len(attempts),
        in_flight=len(attempts) - len(finished),
    )


class PageParser(HTMLParser):
    """Checks nesting and collects each SVG's bar tooltips and the table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.starts: dict[str, int] = {}
        self.ends: dict[str, int] = {}
        self.svg_titles: list[list[str]] = []
        self.body_rows = 0
        self.hrefs: list[str] = []
        self._title: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts[tag] = self.starts.get(tag, 0) + 1
        if tag == "svg":
            self.svg_titles.append([])
        if tag == "title" and self.stack[-1:] == ["rect"]:
            self._title = []
        if tag == "tr" and "tbody" in self.stack:
            self.body_rows += 1
        if tag == "a":
            self.hrefs.append(dict(attrs)["href"] or "")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ends[tag] = self.ends.get(tag, 0) + 1
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
            return
        self.stack.pop()
        if tag == "title" and self._title is not None:
            self.svg_titles[-1].append("".join(self._title))
            self._title = None

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)


def parse(page: str) -> PageParser:
    parser = PageParser()
    parser.feed(page)
    parser.close()
    assert parser.errors == []
    assert parser.stack == []
    return parser


def title_total(titles: list[str]) -> int:
    return sum(int(re.fullmatch(r".*: (\d+)", t, re.S).group(1)) for t in titles)  # type: ignore[union-attr]


def test_csv_round_trips_every_attempt_in_start_order(tmp_path: Path) -> None:
    attempts = campaign()
    # Same start as attempt 5 but a lower id: must sort before it.
    twin = attempt(5, attempt_id=1, number="+44 20 7946 0958")
    shuffled = [*attempts[::-1], twin]
    csv_path, _ = write_report(tmp_path / "out", summary(shuffled), shuffled)

    with csv_path.open(newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    assert rows[0] == CSV_HEADER
    assert len(rows) == len(shuffled) + 1
    by_id = {int(r[0]): dict(zip(CSV_HEADER, r, strict=True)) for r in rows[1:]}
    assert [int(r[0]) for r in rows[1:6]] == [1000, 1001, 1002, 1003, 1004]
    assert [int(r[0]) for r in rows[6:8]] == [1, 1005]

    for a in shuffled:
        row = by_id[a.attempt_id]
        assert row["number"] == a.number
        assert row["started_at"] == a.started_at.isoformat().replace("+00:00", "Z")
        assert row["started_at"].endswith("Z")
        assert datetime.fromisoformat(row["started_at"]) == a.started_at
        ended = a.ended_at.isoformat().replace("+00:00", "Z") if a.ended_at else ""
        assert row["ended_at"] == ended
        assert row["status"] == a.status
        assert row["disposition"] == (a.disposition or "")
        assert row["amd_category"] == (a.amd_category or "")
        assert row["voicemail_left"] == ("true" if a.voicemail_left else "false")
        if a.duration is None:
            assert row["duration"] == ""
        else:
            assert float(row["duration"]) == round(a.duration, 3)
            assert re.fullmatch(r"\d+\.\d{3}", row["duration"])
        assert row["call_id"] == a.call_id
        assert int(row["contact_line"]) == a.contact_line
        assert row["transcript_path"] == ""


def test_csv_quotes_awkward_values(tmp_path: Path) -> None:
    odd = attempt(0, dialer='pod "a", east\nline', transcript_path="calls/a,b.json")
    csv_path, _ = write_report(tmp_path, summary([odd]), [odd])
    with csv_path.open(newline="", encoding="utf-8") as file:
        (row,) = list(csv.DictReader(file))
    assert row["dialer"] == 'pod "a", east\nline'
    assert row["transcript_path"] == "calls/a,b.json"


def test_html_is_self_contained_and_well_formed(tmp_path: Path) -> None:
    attempts = campaign()
    _, html_path = write_report(tmp_path, summary(attempts), attempts)
    page = html_path.read_text(encoding="utf-8")
    parsed = parse(page)

    assert parsed.starts["svg"] == parsed.ends["svg"] == 3
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page.lower()
    assert "@import" not in page and "url(" not in page
    assert "Spring renewals" in page and "running" in page
    assert "voicemail-left 6" in page
    assert parsed.body_rows == len(attempts)


def test_numbers_appear_only_masked_in_html(tmp_path: Path) -> None:
    attempts = campaign()
    page = render_html(summary(attempts), attempts, tmp_path)
    for a in attempts:
        assert a.number not in page
        assert a.number[2:] not in page
        assert mask_number(a.number) in page


def test_strings_from_records_are_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    odd = attempt(0, dialer=evil, disposition=evil, amd_category=evil, call_id=evil)
    page = render_html(summary([odd], name=f"{evil} & co"), [odd], tmp_path)
    parse(page)
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page


def test_dispositions_bars_count_every_finished_attempt(tmp_path: Path) -> None:
    attempts = campaign()
    finished = [a for a in attempts if a.status != "dialing"]
    parsed = parse(render_html(summary(attempts), attempts, tmp_path))
    disposition_titles, amd_titles, handle_titles = parsed.svg_titles

    assert title_total(disposition_titles) == len(finished)
    assert title_total([t for t in disposition_titles if ", completed: " in t]) == sum(
        a.disposition == "completed" for a in finished
    )
    assert title_total([t for t in disposition_titles if ", abandoned: " in t]) == 1
    # 3 h of attempts: 5 minute buckets labelled in HH:MM.
    assert "09:05 UTC, " in " ".join(disposition_titles)

    assert title_total(amd_titles) == len(finished)
    not_answered = [t for t in amd_titles if t.startswith("not answered: ")]
    assert title_total(not_answered) == sum(a.amd_category is None for a in finished)

    answered = [a for a in finished if a.duration and a.duration > 0]
    assert title_total(handle_titles) == len(answered)


def test_dispositions_have_stable_colours() -> None:
    chart = dispositions_chart([attempt(0), attempt(2), attempt(3)])
    assert 'fill="#2e9d4a"><title>09:00 UTC, completed: 1' in chart
    assert "busy: 1" in chart and "#f28e2b" in chart
    assert "#9e9e9e" in chart


@pytest.mark.parametrize(
    ("span", "step"),
    [
        (timedelta(0), timedelta(minutes=1)),
        (timedelta(minutes=47), timedelta(minutes=1)),
        (timedelta(minutes=48), timedelta(minutes=5)),
        (timedelta(hours=3), timedelta(minutes=5)),
        (timedelta(hours=10), timedelta(minutes=15)),
        (timedelta(days=1), timedelta(hours=1)),
        (timedelta(days=2), timedelta(hours=2)),
        (timedelta(days=30), timedelta(days=1)),
        (timedelta(days=100), timedelta(days=3)),
    ],
)
def test_bucket_size_follows_the_span(span: timedelta, step: timedelta) -> None:
    assert bucket_size(span) == step


@pytest.mark.parametrize("minutes", [0, 7, 59, 61, 400, 2879, 2881, 9000, 200_000])
def test_dispositions_chart_never_has_more_than_48_buckets(minutes: int) -> None:
    start = T0 + timedelta(seconds=59)
    rows = [
        attempt(0, started_at=start, ended_at=start),
        attempt(1, started_at=start, ended_at=start + timedelta(minutes=minutes)),
    ]
    chart = dispositions_chart(rows)
    assert title_total(re.findall(r"<title>([^<]*)</title>", chart)) == 2
    # Bucket i sits at 44 + i * 660 / n (plus a fixed offset): the last of n <= 48 buckets
    # is at most 47 / 48 of the plot away from the first.
    xs = [float(x) for x in re.findall(r'<rect x="([^"]*)"[^>]*><title>', chart)]
    assert max(xs) - min(xs) <= 660 * 47 / 48 + 0.1


def test_time_axis_shows_dates_for_long_spans() -> None:
    rows = [attempt(i, ended_at=T0 + timedelta(days=i)) for i in range(30)]
    chart = dispositions_chart(rows)
    assert ">2025-03-03<" in chart and "2025-03-10" in chart
    short = dispositions_chart([attempt(i) for i in range(10)])
    assert re.search(r">09:\d\d<", short)


def test_empty_campaign_still_renders(tmp_path: Path) -> None:
    csv_path, html_path = write_report(tmp_path / "new", summary([]), [])
    assert csv_path.read_text(encoding="utf-8").strip() == ",".join(CSV_HEADER)
    page = html_path.read_text(encoding="utf-8")
    parsed = parse(page)
    assert parsed.starts["svg"] == 3
    assert "no attempts yet" in page
    assert "no answered calls" in page
    assert "answered n/a" in page


def test_only_in_flight_attempts(tmp_path: Path) -> None:
    dialing = [attempt(i, status="dialing", ended_at=None, disposition=None) for i in range(3)]
    page = render_html(summary(dialing), dialing, tmp_path)
    parsed = parse(page)
    assert parsed.svg_titles == [[], [], []]
    assert "no finished attempts yet" in page and "no answered calls" in page
    assert parsed.body_rows == 3


def test_all_attempts_at_one_instant(tmp_path: Path) -> None:
    rows = [attempt(i, started_at=T0, ended_at=T0, duration=12.0) for i in range(9)]
    page = render_html(summary(rows), rows, tmp_path)
    disposition_titles, _, handle_titles = parse(page).svg_titles
    assert title_total(disposition_titles) == 9
    assert all(t.startswith("09:00 UTC, ") for t in disposition_titles)
    assert handle_titles == ["12 s to 13 s: 9"]
    assert "dials per hour" in page and "n/a dials per hour" in page


def test_naive_datetimes_are_taken_as_utc(tmp_path: Path) -> None:
    naive = T0.replace(tzinfo=None)
    rows = [
        attempt(0, started_at=naive, ended_at=naive + timedelta(minutes=1)),
        attempt(1),
    ]
    csv_path, html_path = write_report(tmp_path, summary(rows), rows)
    assert "2025-03-03T09:00:00Z" in csv_path.read_text(encoding="utf-8")
    assert "09:01 UTC, completed: 1" in html_path.read_text(encoding="utf-8")


def test_figures() -> None:
    rows = [
        attempt(0, duration=10.0),
        attempt(1, duration=20.0),
        attempt(6, duration=40.0),
        attempt(2, started_at=T0 + timedelta(hours=2), ended_at=T0 + timedelta(hours=2)),
        attempt(3, status="dialing", ended_at=None, disposition=None, duration=None),
    ]
    f = figures(summary(rows), rows)
    assert (f.finished, f.done, f.answered) == (4, 4, 3)
    assert f.answered_rate == pytest.approx(0.75)
    assert f.median_handle == 20.0
    assert f.p90_handle == pytest.approx(36.0)
    assert f.first_dial_at == T0
    assert f.span == timedelta(hours=2)
    assert f.dials_per_hour == pytest.approx(2.5)


def test_table_shows_the_newest_500(tmp_path: Path) -> None:
    rows = [attempt(i) for i in range(510)]
    page = render_html(summary(rows), rows, tmp_path)
    assert parse(page).body_rows == 500
    assert "showing the newest 500 of 510 attempts" in page
    tbody = page[page.index("<tbody>") :]
    assert tbody.index(">1509<") < tbody.index(">1508<")
    assert ">1009<" not in tbody


def test_file_links_are_relative_and_escaped(tmp_path: Path) -> None:
    out = tmp_path / "report"
    rows = [
        attempt(0, transcript_path=str(tmp_path / "calls" / "0.json")),
        attempt(1, recording_path=str(tmp_path / "rec dir" / "a&b.wav")),
        attempt(2, transcript_path="javascript:alert(1)"),
    ]
    hrefs = parse(render_html(summary(rows), rows, out)).hrefs
    assert len(hrefs) == 3
    assert "../calls/0.json" in hrefs
    assert "../rec%20dir/a%26b.wav" in hrefs
    assert all(":" not in href for href in hrefs)


def test_out_dir_that_is_a_file_fails_cleanly(tmp_path: Path) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("not a folder")
    attempts = campaign(6)
    with pytest.raises(OSError):
        write_report(blocker, summary(attempts), attempts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert blocker.read_text() == "not a folder"


def test_failed_rename_leaves_no_temp_file_and_keeps_the_old_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "report.html").write_text("previous report")
    real_replace = os.replace

    def replace(src: str, dst: str | Path) -> None:
        if str(dst).endswith("report.html"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(report.os, "replace", replace)
    attempts = campaign(6)
    with pytest.raises(OSError, match="No space"):
        write_report(tmp_path, summary(attempts), attempts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attempts.csv", "report.html"]
    assert (tmp_path / "report.html").read_text() == "previous report"
