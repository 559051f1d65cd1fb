"""Call timeline pages: what they show, from a replayed call's real messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.messages import AgentSentence, GuardrailEvaluated
from agent.replay.timeline import CallPage, render_call_page, write_suite_index
from agent.worker import write_call_page_from_env
from tests.unit.test_replay_calls import _call, _replay


def _page(name: str) -> tuple[CallPage, str]:
    (replayed,) = _replay([_call(name)])
    page = CallPage.of(replayed)
    return page, render_call_page(page)


def test_a_page_has_one_span_and_one_row_per_turn_and_needs_no_network() -> None:
    page, html = _page("amd/human-hello-plain")
    turns = page.result.turns
    assert turns
    assert len(re.findall(r'<g class="turn (callee|agent)">', html)) == len(turns)
    assert html.count('<tr class="turn-row') == len(turns)
    assert "http://" not in html and "https://" not in html
    assert "no recording" in html  # a text replay
    # the callee's words are on the page, escaped
    assert turns[0].text.split()[0] in html


def test_latency_spans_run_from_the_end_of_a_callee_line_to_the_agents_next_audio() -> None:
    page, html = _page("amd/human-hello-plain")
    spans = re.findall(r"end of callee speech to first agent audio: ([0-9.]+) s", html)
    assert spans, "the answered line has a latency span"
    first_agent = next(t.start for t in page.result.turns if t.role == "agent")
    first_callee_end = next(t.end for t in page.result.turns if t.role == "callee")
    assert float(spans[0]) == pytest.approx(first_agent - first_callee_end, abs=0.35)


def test_blocked_sentences_are_marked_and_spoken_ones_are_not() -> None:
    page, _ = _page("amd/human-hello-plain")
    extra = [
        AgentSentence(call_id="c", at=page.t0 + 1.0, run_id="run_x", index=0, text="fine"),
        AgentSentence(call_id="c", at=page.t0 + 1.5, run_id="run_x", index=1, text="secret"),
        GuardrailEvaluated(
            call_id="c",
            at=page.t0 + 1.5,
            hook="on_agent_sentence",
            action="block",
            run_id="run_x",
            index=1,
            decisions={"sensitive_data": 0.93},
        ),
    ]
    html = render_call_page(CallPage(page.result, page.messages + extra))
    assert html.count('class="sentence blocked"') == 1
    assert 'class="guardrail block"' in html and "sensitive_data=0.93" in html


def test_the_index_links_every_call_with_its_result(tmp_path: Path) -> None:
    page, _ = _page("amd/human-hello-plain")
    target = tmp_path / "calls" / "x.html"
    target.parent.mkdir()
    target.write_text("x")
    index = write_suite_index(tmp_path, [(target, page)]).read_text()
    assert 'href="calls/x.html"' in index
    assert "1 of 1 calls met their expectations" in index


def test_the_worker_writes_a_page_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page, _ = _page("amd/human-hello-plain")
    monkeypatch.delenv("CALLRT_CALL_PAGES", raising=False)
    assert write_call_page_from_env("call_1", page.result, page.messages) is None
    monkeypatch.setenv("CALLRT_CALL_PAGES", str(tmp_path))
    written = write_call_page_from_env("call_1", page.result, page.messages)
    assert written == tmp_path / "calls" / "call_1.html"
    assert written.read_text().count('<tr class="turn-row') == len(page.result.turns)
