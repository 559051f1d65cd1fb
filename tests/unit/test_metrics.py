"""Prometheus call metrics: from a call's bus messages to the worker's endpoint.

Recorded calls are replayed text-only with scripted models (virtual clock),
then their messages are published on a fresh bus that :func:`observe_call`
watches. The endpoint test runs a separate process, as livekit runs a job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from agent.app.call import ModelSet
from agent.app.config import load_config
from agent.app.metrics import (
    CallMetrics,
    get_metrics,
    metrics_port,
    observe_call,
    reset_metrics,
    serve_metrics,
    shutdown_metrics,
    track_call,
)
from agent.core import Bus, clock
from agent.core.messages import LATENCY_STAGES, CallEnded, CallStarted, LatencyClock, TurnLatency
from agent.models.estimate_tts import EstimateTTS
from agent.replay.loader import load_paths
from agent.replay.runner import Replayer, ReplayOptions
from agent.telephony.sim.io import TranscriptFeedSTT
from tests.conftest import CALLS, ROOT
from tests.fakes.models import ScriptedLLM

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def replayed() -> dict[str, list[object]]:
    """Every bus message of a few recorded calls (the default config: rule guardrails on)."""
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=ScriptedLLM(),
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )
    replayer = Replayer(load_config(), ReplayOptions(text_only=True), models=models)
    names = [
        "amd/human-hello-plain",
        "amd/vm-chris-beep-1000",
        "guardrails/prompt-injection-steered",
        "outbound-busy",
    ]
    calls = load_paths([CALLS / f"{name}.call.yaml" for name in names])
    return {r.result.name: r.messages for r in clock.run(replayer.replay_all(calls))}


@pytest.fixture
def metrics() -> CallMetrics:
    return CallMetrics(CollectorRegistry())


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    try:
        yield serve_metrics(0, host="127.0.0.1")
    finally:
        shutdown_metrics()


def _value(m: CallMetrics, name: str, **labels: str) -> float:
    value = m.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def _play(messages: list[object], m: CallMetrics) -> None:
    bus = Bus("call_test")
    with track_call(bus, m):
        for msg in messages:
            bus.publish(msg)


def test_answered_human_call_counts_disposition_amd_and_response_times(
    replayed: dict[str, list[object]], metrics: CallMetrics
) -> None:
    _play(replayed["human-hello-plain"], metrics)
    assert _value(metrics, "callrt_calls_total", disposition="completed") == 1.0
    assert _value(metrics, "callrt_amd_decisions_total", category="human") == 1.0
    # AMD decided 0.3 s after "Hello?" ended (amd.human_silence) and the greeting
    # answered it then; the agent answered the two later callee lines 0.9 s after
    # each ended (the endpointing delay of configs/default.yaml)
    assert _value(metrics, "callrt_amd_decision_seconds_count") == 1.0
    assert _value(metrics, "callrt_amd_decision_seconds_sum") == pytest.approx(0.3, abs=0.01)
    assert _value(metrics, "callrt_response_seconds_count") == 3.0
    # virtual-clock timings differ by a few tens of milliseconds between runs
    assert _value(metrics, "callrt_response_seconds_sum") == pytest.approx(2.1, abs=0.05)
    assert _value(metrics, "callrt_response_seconds_bucket", le="0.2") == 0.0
    assert _value(metrics, "callrt_response_seconds_bucket", le="0.4") == 1.0
    assert _value(metrics, "callrt_active_calls") == 0.0


def test_voicemail_call_counts_its_category_and_disposition(
    replayed: dict[str, list[object]], metrics: CallMetrics
) -> None:
    _play(replayed["vm-chris-beep-1000"], metrics)
    assert _value(metrics, "callrt_calls_total", disposition="voicemail") == 1.0
    assert _value(metrics, "callrt_calls_total", disposition="completed") == 0.0
    assert _value(metrics, "callrt_amd_decisions_total", category="machine-vm") == 1.0
    # AMD knew it was voicemail mid-greeting, before any callee speech ended:
    # measured from the answer (4.0 s) to the decision (10.87 s)
    assert _value(metrics, "callrt_amd_decision_seconds_count") == 1.0
    assert _value(metrics, "callrt_amd_decision_seconds_sum") == pytest.approx(6.87, abs=0.01)


def test_guardrail_actions_are_counted_by_hook_and_action(
    replayed: dict[str, list[object]], metrics: CallMetrics
) -> None:
    _play(replayed["prompt-injection-steered"], metrics)
    steer = {"hook": "on_user_turn", "action": "steer"}
    assert _value(metrics, "callrt_guardrail_actions_total", **steer) == 1.0
    assert (
        _value(metrics, "callrt_guardrail_actions_total", hook="on_user_turn", action="block") == 0
    )
    sentences = _value(
        metrics, "callrt_guardrail_actions_total", hook="on_agent_sentence", action="allow"
    )
    assert sentences >= 1
    assert _value(metrics, "callrt_guardrail_seconds_count", hook="on_agent_sentence") == sentences


def test_unanswered_call_counts_only_its_disposition(
    replayed: dict[str, list[object]], metrics: CallMetrics
) -> None:
    _play(replayed["outbound-busy"], metrics)
    assert _value(metrics, "callrt_calls_total", disposition="busy") == 1.0
    assert _value(metrics, "callrt_amd_decision_seconds_count") == 0.0
    assert _value(metrics, "callrt_response_seconds_count") == 0.0
    assert _value(metrics, "callrt_active_calls") == 0.0


def test_a_call_is_active_from_its_start_until_its_end(metrics: CallMetrics) -> None:
    bus = Bus("c1")
    call = observe_call(bus, metrics)
    bus.publish(CallStarted(call_id="c1", at=1.0, direction="outbound"))
    assert _value(metrics, "callrt_active_calls") == 1.0
    bus.publish(CallEnded(call_id="c1", at=9.0, disposition="completed", reason="hangup"))
    assert _value(metrics, "callrt_active_calls") == 0.0
    call.close()
    bus.publish(CallEnded(call_id="c1", at=9.5, disposition="error", reason="late"))
    assert _value(metrics, "callrt_active_calls") == 0.0
    assert _value(metrics, "callrt_calls_total", disposition="completed") == 1.0
    assert _value(metrics, "callrt_calls_total", disposition="error") == 0.0


def test_a_call_that_raises_is_no_longer_active_and_counts_as_an_error(
    metrics: CallMetrics,
) -> None:
    bus = Bus("c1")
    with pytest.raises(RuntimeError), track_call(bus, metrics):
        bus.publish(CallStarted(call_id="c1", at=1.0, direction="inbound"))
        assert _value(metrics, "callrt_active_calls") == 1.0
        raise RuntimeError("the line broke")
    assert _value(metrics, "callrt_active_calls") == 0.0
    assert _value(metrics, "callrt_calls_total", disposition="error") == 1.0


def test_a_call_that_raises_after_its_end_is_counted_once(metrics: CallMetrics) -> None:
    bus = Bus("c1")
    with pytest.raises(RuntimeError), track_call(bus, metrics):
        bus.publish(CallStarted(call_id="c1", at=1.0, direction="outbound"))
        bus.publish(CallEnded(call_id="c1", at=5.0, disposition="voicemail", reason="left"))
        raise RuntimeError("cleanup failed")
    assert _value(metrics, "callrt_active_calls") == 0.0
    assert _value(metrics, "callrt_calls_total", disposition="voicemail") == 1.0
    assert _value(metrics, "callrt_calls_total", disposition="error") == 0.0


def _turn_latency(clock: LatencyClock) -> TurnLatency:
    # stages: vad 0.3, stt 0.1, endpointing 0.5, llm_request 0.05, llm_first_token 0.35,
    # first_sentence 0.2, tts 0.2, playout 0.1; total 1.8
    return TurnLatency(
        call_id="c1",
        at=13.8,
        turn_id="turn_1",
        run_id="run_1",
        clock=clock,
        audio_end=12.0,
        vad_end=12.3,
        stt_final=12.4,
        committed=12.9,
        llm_request=12.95,
        llm_first_token=13.3,
        first_sentence=13.5,
        tts_first_audio=13.7,
        first_audio=13.8,
    )


def test_a_wall_clock_turn_latency_is_observed_stage_by_stage(metrics: CallMetrics) -> None:
    bus = Bus("c1")
    observe_call(bus, metrics)
    bus.publish(_turn_latency("wall"))
    expected = dict(zip(LATENCY_STAGES, (0.3, 0.1, 0.5, 0.05, 0.35, 0.2, 0.2, 0.1), strict=True))
    for stage, seconds in {**expected, "total": 1.8}.items():
        assert _value(metrics, "callrt_stage_seconds_count", stage=stage) == 1.0, stage
        assert _value(metrics, "callrt_stage_seconds_sum", stage=stage) == pytest.approx(seconds)
    assert _value(metrics, "callrt_stage_seconds_bucket", stage="endpointing", le="0.3") == 0.0
    assert _value(metrics, "callrt_stage_seconds_bucket", stage="endpointing", le="0.5") == 1.0
    assert _value(metrics, "callrt_stage_seconds_bucket", stage="total", le="1.5") == 0.0
    assert _value(metrics, "callrt_stage_seconds_bucket", stage="total", le="2.0") == 1.0


def test_a_virtual_clock_turn_latency_is_not_a_measurement(metrics: CallMetrics) -> None:
    bus = Bus("c1")
    observe_call(bus, metrics)
    bus.publish(_turn_latency("virtual"))
    for stage in (*LATENCY_STAGES, "total"):
        assert _value(metrics, "callrt_stage_seconds_count", stage=stage) == 0.0, stage


def test_get_metrics_is_made_once_per_process_and_resettable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    reset_metrics()
    try:
        first = get_metrics()
        assert get_metrics() is first
        reset_metrics()
        assert get_metrics() is not first
    finally:
        reset_metrics()


JOB = textwrap.dedent(
    """
    import os, sys
    from agent.core.messages import CallEnded, CallStarted
    from agent.app.metrics import get_metrics, observe_call, track_call
    from agent.core import Bus

    bus = Bus("job")
    with track_call(bus, get_metrics()):
        bus.publish(CallStarted(call_id="job", at=0.0, direction="outbound"))
        bus.publish(CallEnded(call_id="job", at=3.0, disposition="completed", reason="hangup"))
    # a second call whose process dies mid-call: its finally never runs
    observe_call(Bus("dead"), get_metrics()).start()
    sys.stdout.flush()
    os._exit(0)
    """
)


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The endpoint's samples: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_job_process_metrics_reach_the_workers_endpoint(served: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", JOB], env=env, cwd=ROOT, check=True, timeout=20)
    samples = _scrape(served)
    assert samples[("callrt_calls_total", (("disposition", "completed"),))] == 1.0
    # the process that died mid-call is not an active call
    assert samples.get(("callrt_active_calls", ()), 0.0) == 0.0


def test_endpoint_serves_the_metric_families_before_any_call(served: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "from agent.app.metrics import get_metrics; get_metrics()"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, timeout=20)
    samples = _scrape(served)
    assert samples[("callrt_response_seconds_count", ())] == 0.0
    assert samples[("callrt_stage_seconds_count", (("stage", "total"),))] == 0.0
    assert served.endswith("/metrics")


@pytest.mark.parametrize("raw", ["abc", "-1", "65536", "80.5"])
def test_a_bad_metrics_port_names_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match="CALLRT_METRICS_PORT"):
        metrics_port({"CALLRT_METRICS_PORT": raw})


def test_metrics_port_is_optional() -> None:
    assert metrics_port({}) is None
    assert metrics_port({"CALLRT_METRICS_PORT": " 9464 "}) == 9464


def test_a_taken_port_names_the_variable(served: str) -> None:
    port = int(served.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(OSError, match="CALLRT_METRICS_PORT"):
        serve_metrics(port, host="127.0.0.1")
