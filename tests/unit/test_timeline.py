"""Call timeline pages: what they show, from a replayed call's real messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.app.worker import write_call_page_from_env
from agent.core.messages import (
    LATENCY_STAGES,
    AgentSentence,
    AgentSpeechStarted,
    AgentTurnCompleted,
    CallAnswered,
    CallEnded,
    GuardrailEvaluated,
    LatencyClock,
    TurnLatency,
    UserSpeechStarted,
    UserSpeechStopped,
    UserTurnCompleted,
)
from agent.replay.observer import CallObserver
from agent.replay.results import CallResult, TurnLatencyResult
from agent.replay.timeline import (
    STAGE_COLORS,
    VIRTUAL_NOTE,
    WIDTH,
    CallPage,
    render_call_page,
    write_suite_index,
)
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
    # a result without per-stage breakdowns: one plain span per answered line
    page, _ = _page("amd/human-hello-plain")
    page = CallPage(_without_breakdowns(page.result), page.messages, played=page.played)
    html = render_call_page(page)
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


# -- per-stage response latency ------------------------------------------------

T0 = 100.0  # the answer, on the loop clock


def _without_breakdowns(result: CallResult) -> CallResult:
    turns = [t.model_copy(update={"latency": None}) for t in result.turns]
    return result.model_copy(update={"turns": turns})


def _turn(
    i: int,
    start: float,
    end: float,
    reply: float,
    clock: LatencyClock = "wall",
    **milestones: float,
) -> list[object]:
    """One callee turn (times after the answer), the agent's reply and its TurnLatency."""
    turn_id, run_id = f"turn_{i}", f"run_{i}"
    at = {k: T0 + v for k, v in milestones.items()}
    return [
        UserSpeechStarted(call_id="c", at=T0 + start),
        UserSpeechStopped(call_id="c", at=T0 + end),
        UserTurnCompleted(
            call_id="c", at=at.get("committed", T0 + end), turn_id=turn_id, text="hi"
        ),
        AgentSpeechStarted(call_id="c", at=T0 + reply, run_id=run_id),
        TurnLatency.model_validate(
            {
                "call_id": "c",
                "at": T0 + reply,
                "turn_id": turn_id,
                "run_id": run_id,
                "clock": clock,
                "first_audio": T0 + reply,
                "prompt_tokens": 812,
                "cached_tokens": 768,
                **at,
            }
        ),
        AgentTurnCompleted(
            call_id="c", at=T0 + reply + 2.0, run_id=run_id, text="hello", interrupted=False
        ),
    ]


def _stage_page(clock: LatencyClock = "wall") -> CallPage:
    """Two answered turns, their breakdowns built by the replay's CallObserver."""
    msgs: list[object] = [CallAnswered(call_id="c", at=T0)]
    # turn 1: every milestone; stages 0.3, 0.1, 0.5, 0.05, 0.35, 0.2, 0.2, 0.1 = 1.8 s
    msgs += _turn(
        1,
        0.5,
        2.0,
        3.8,
        clock,
        audio_end=2.0,
        vad_end=2.3,
        stt_final=2.4,
        committed=2.9,
        llm_request=2.95,
        llm_first_token=3.3,
        first_sentence=3.5,
        tts_first_audio=3.7,
    )
    # turn 2: no VAD, a preemptive reply whose LLM work overlapped endpointing
    msgs += _turn(
        2,
        7.0,
        9.0,
        10.0,
        clock,
        stt_final=9.0,
        llm_request=9.1,
        llm_first_token=9.4,
        committed=9.6,
        first_sentence=9.7,
        tts_first_audio=9.9,
    )
    msgs.append(CallEnded(call_id="c", at=T0 + 20.0, disposition="completed", reason="hangup"))
    observer = CallObserver()
    for m in msgs:
        observer.on_message(m)
    return CallPage(observer.result("stages"), observer.messages)


def _bars(html: str) -> list[str]:
    return re.findall(r'<g class="stages[^"]*">.*?</g>', html, re.S)


def _segments(bar: str) -> list[tuple[str, float, float, float]]:
    """(stage, seconds, x, width) of each segment of a bar."""
    return [
        (stage, float(sec), float(x), float(w))
        for stage, sec, x, w in re.findall(
            r'<rect class="stage (\w+)" data-seconds="([0-9.]+)" x="([0-9.]+)" '
            r'y="[0-9.]+" width="([0-9.]+)"',
            bar,
        )
    ]


def test_each_answered_turn_is_a_bar_stacked_by_stage_from_its_origin_to_its_first_audio() -> None:
    page = _stage_page()
    html = render_call_page(page)
    bars = _bars(html)
    assert len(bars) == 2
    first = _segments(bars[0])
    # one segment per stage that took time, in pipeline order, as long as its seconds
    assert [s for s, *_ in first] == list(LATENCY_STAGES)
    expected = [0.3, 0.1, 0.5, 0.05, 0.35, 0.2, 0.2, 0.1]
    assert [sec for _, sec, _, _ in first] == pytest.approx(expected, abs=1e-6)
    px = WIDTH / page.span
    for _, sec, _, width in first:
        assert width == pytest.approx(sec * px, abs=0.01)
    # contiguous, from the end of the callee's audio (2.0 s) to the first audio (3.8 s)
    for (_, _, x, w), (_, _, nx, _) in zip(first, first[1:], strict=False):
        assert x + w == pytest.approx(nx, abs=0.01)
    assert first[0][2] == pytest.approx(page.x(2.0), abs=0.01)
    assert first[-1][2] + first[-1][3] == pytest.approx(page.x(3.8), abs=0.01)
    # the preemptive turn: LLM work before the commit costs nothing, so no segment for it
    second = _segments(bars[1])
    assert [s for s, *_ in second] == ["endpointing", "first_sentence", "tts", "playout"]
    assert sum(sec for _, sec, _, _ in second) == pytest.approx(1.0, abs=1e-6)
    # the tooltip names every stage's seconds and the total
    title = re.search(r"<title>(.*?)</title>", bars[0], re.S)
    assert title is not None
    for stage, sec in zip(LATENCY_STAGES, expected, strict=True):
        assert f"{stage}: {sec:.3f} s" in title.group(1)
    assert "total: 1.800 s" in title.group(1)


def test_stage_colours_are_fixed_and_the_legend_names_each_stage() -> None:
    html = render_call_page(_stage_page())
    for stage in LATENCY_STAGES:
        color = STAGE_COLORS[stage]
        assert re.search(rf'class="stage {stage}"[^>]*fill="{color}"', html), stage
        assert f'background:{color}"></span>{stage}</span>' in html
    assert len(set(STAGE_COLORS.values())) == len(LATENCY_STAGES)


def test_the_stages_table_has_a_row_per_answered_turn_and_a_header_per_column() -> None:
    html = render_call_page(_stage_page())
    table = re.search(r'<table class="stages">(.*?)</table>', html, re.S)
    assert table is not None
    header = re.findall(r"<th>([^<]+)</th>", table.group(1))
    rows = re.findall(r'<tr class="stage-row[^"]*">(.*?)</tr>', table.group(1))
    assert len(rows) == 2
    for row in rows:
        assert len(re.findall(r"<td>", row)) == len(header)
    assert [h.removesuffix(" (s)") for h in header[2 : 2 + len(LATENCY_STAGES) + 1]] == [
        *LATENCY_STAGES,
        "total",
    ]
    cells = re.findall(r"<td>([^<]*)</td>", rows[0])
    assert cells[2:11] == [
        "0.300",
        "0.100",
        "0.500",
        "0.050",
        "0.350",
        "0.200",
        "0.200",
        "0.100",
        "1.800",
    ]
    assert cells[-1] == "812 (768)"


def test_virtual_clock_figures_are_labelled_and_wall_clock_ones_are_not(tmp_path: Path) -> None:
    virtual, wall = _stage_page("virtual"), _stage_page("wall")
    v_html, w_html = render_call_page(virtual), render_call_page(wall)
    for bar in _bars(v_html):
        assert VIRTUAL_NOTE in bar
    figures = re.search(r'<table class="figures">(.*?)</table>', v_html, re.S)
    assert figures is not None and VIRTUAL_NOTE in figures.group(1)
    assert "virtual" not in w_html.split("<body>", 1)[1]
    # the index says "virtual" instead of a number that looks measured
    pages = [(tmp_path / "calls" / "v.html", virtual), (tmp_path / "calls" / "w.html", wall)]
    index = write_suite_index(tmp_path, pages).read_text()
    p50 = re.findall(r"<td>[0-9.]+</td><td>([^<]+)</td><td>[^<]+</td></tr>", index)
    assert p50 == ["virtual", "1.80"]


def test_a_line_with_a_breakdown_loses_its_plain_span_and_the_others_keep_theirs() -> None:
    page, _ = _page("amd/human-hello-plain")
    plain = _without_breakdowns(page.result)
    callee = next(i for i, t in enumerate(plain.turns) if t.role == "callee")
    reply = next(t.start for t in plain.turns if t.role == "agent")
    end = next(e for p, _, e in page.played if p in ("say", "audio"))
    lat = TurnLatencyResult(
        clock="wall",
        total=reply - end,
        stages={"endpointing": reply - end},
        milestones={"audio_end": end, "first_audio": reply},
    )
    turns = list(plain.turns)
    turns[callee] = turns[callee].model_copy(update={"latency": lat})
    with_one = plain.model_copy(update={"turns": turns})
    before = render_call_page(CallPage(plain, page.messages, played=page.played))
    after = render_call_page(CallPage(with_one, page.messages, played=page.played))
    spans = "end of callee speech to first agent audio"
    assert before.count(spans) >= 2
    assert after.count(spans) == before.count(spans) - 1
    assert len(_bars(after)) == 1


def test_a_replayed_call_shows_a_virtual_clock_bar_for_every_answered_line() -> None:
    page, html = _page("amd/human-hello-plain")
    answered = sum(1 for t in page.result.turns if t.latency is not None)
    assert answered == 3  # every callee line of the call was answered
    bars = _bars(html)
    assert len(bars) == answered
    assert all('class="stages virtual"' in bar and VIRTUAL_NOTE in bar for bar in bars)
    assert "end of callee speech to first agent audio:" not in html  # no duplicate plain span
