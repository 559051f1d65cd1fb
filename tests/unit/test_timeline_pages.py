"""What a new user reads on a call page (issue 17): labels that fit, headed columns,
AMD on inbound calls, and campaign calls titled by campaign, contact and attempt.

The real text boxes are checked in headless Chromium (tests/integration/test_call_pages.py);
here the label layout is checked as pure logic, and the pages as HTML.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from agent.app.config import AgentConfig
from agent.campaigns.dispatch import DialRequest, SimulatorDispatcher
from agent.core import clock
from agent.replay.labels import GAP, Label, place_labels, text_width
from agent.replay.timeline import CallPage, render_call_page, write_suite_index
from tests.unit.test_replay_calls import _call, _replay, _replayer

RIGHT = 1238.0


def _boxes(labels: list[Label]) -> list[tuple[float, float]]:
    placed = place_labels(labels, right=RIGHT)
    return [(p.x, p.x + text_width(p.text, 10)) for p in placed if p.text]


def test_labels_that_would_collide_are_cut_to_the_room_before_the_next() -> None:
    labels = [Label(100, "Thank you for calling Metro Power and Light."), Label(160, "Hello")]
    first, second = place_labels(labels, right=RIGHT)
    assert first.text.endswith("\u2026") and len(first.text) < len(labels[0].text)
    assert first.x + first.width + GAP <= second.x
    assert second.text == "Hello"


def test_a_label_at_the_right_edge_ends_there_instead_of_being_clipped() -> None:
    (beep,) = place_labels([Label(RIGHT - 5, "beep")], right=RIGHT)
    assert beep.text == "beep"
    assert beep.x + beep.width <= RIGHT


def test_a_label_with_no_room_is_left_out_not_drawn_over_its_neighbour() -> None:
    first, second = place_labels([Label(300, "human"), Label(301, "human")], right=RIGHT)
    assert first.text == "" and second.text == "human"


def test_no_two_placed_labels_overlap_and_none_passes_the_edge() -> None:
    rng = random.Random(17)
    words = ["human", "beep", "machine-vm", "1", "0.50s virtual", "Please hold while we connect"]
    for _ in range(300):
        labels = [
            Label(rng.uniform(120, RIGHT), rng.choice(words)) for _ in range(rng.randint(1, 12))
        ]
        boxes = sorted(_boxes(labels))
        for (_, end), (start, _) in zip(boxes, boxes[1:], strict=False):
            assert end + GAP <= start + 1e-6
        assert all(end <= RIGHT + 1e-6 for _, end in boxes)


def test_every_table_column_of_a_page_has_a_header() -> None:
    (replayed,) = _replay([_call("amd/human-hello-plain")])
    html = render_call_page(CallPage.of(replayed))
    headers = re.findall(r"<th>(.*?)</th>", html, flags=re.S)
    assert headers and all(h.strip() for h in headers)
    for table in re.findall(r"<table.*?</table>", html, flags=re.S):
        rows = re.findall(r"<tr.*?</tr>", table, flags=re.S)
        widths = {len(re.findall(r"<t[hd][ >]", row)) for row in rows}
        assert len(widths) == 1, table[:80]  # a header for every cell of every row


def test_an_inbound_call_shows_amd_as_not_applicable(tmp_path: Path) -> None:
    (replayed,) = _replay([_call("inbound-billing-question")])
    page = CallPage.of(replayed)
    html = render_call_page(page)
    assert "<th>AMD</th><td>n/a (inbound)</td>" in html
    assert "uncertain" not in html
    index = write_suite_index(tmp_path, [(tmp_path / "calls" / "x.html", page)]).read_text()
    assert "<td>n/a (inbound)</td>" in index


def test_an_outbound_call_still_shows_its_amd_verdict() -> None:
    (replayed,) = _replay([_call("amd/human-hello-plain")])
    assert "<th>AMD</th><td>human</td>" in render_call_page(CallPage.of(replayed))


@pytest.mark.parametrize("number", ["+15550100101"])
def test_a_campaign_call_page_is_titled_by_campaign_masked_contact_and_attempt(
    tmp_path: Path, number: str
) -> None:
    replayer = _replayer()
    dispatcher = SimulatorDispatcher(
        [_call("amd/human-hello-plain")],
        AgentConfig(),
        text_only=True,
        out_dir=tmp_path,
        models=replayer.models(),
    )
    request = DialRequest(
        campaign="spring",
        campaign_id=1,
        contact_id=4,
        contact_line=5,
        attempt_id=9,
        attempt_no=2,
        number=number,
    )
    clock.run(dispatcher.dial(request))
    html = (tmp_path / "calls" / "attempt-9.html").read_text(encoding="utf-8")
    title = "campaign spring: contact +1********01, attempt 2"
    assert f"<title>{title}</title>" in html
    assert f"<h1>{title}</h1>" in html
    assert "recorded call human-hello-plain" in html
    assert number not in html and number[1:] not in html
