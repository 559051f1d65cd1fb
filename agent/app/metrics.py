"""Prometheus metrics for calls, served by the worker on ``CALLRT_METRICS_PORT``.

:func:`observe_call` (or :func:`track_call`, which also guarantees the active
gauge comes back down) turns one call's bus messages into the ``callrt_*``
metrics of :class:`CallMetrics`: calls by disposition, calls in progress, AMD's
final categories and decision time, guardrail actions and evaluation time, the
response time (end of callee speech to the agent's first audio) and, from each
``turn_latency`` message of a call on the wall clock, the seconds each stage of a
reply added (virtual-clock figures are not measurements: models take no time there).

Multiprocess mode: livekit runs each job (one call) in its own process, forked
from a forkserver the worker's main process starts. The job processes write
their values to files in ``PROMETHEUS_MULTIPROC_DIR`` and the main process
serves the sum of them (prometheus_client's multiprocess mode). So:

- :func:`serve_metrics` runs in the main process *before* livekit starts job
  processes: it sets ``PROMETHEUS_MULTIPROC_DIR`` (a fresh
  ``callrt-metrics-*`` temp folder unless it is already set) so every job
  process inherits it; livekit empties the folder when the worker starts.
- Job processes create their metric objects lazily (:func:`get_metrics`), after
  the variable is set. prometheus_client picks its value storage when it is
  first imported; a process that imported it before the variable was set is
  switched to file storage by :func:`get_metrics`.
- ``callrt_active_calls`` is a ``livesum`` gauge: only live processes count.
  A job process that died mid-call (killed, so its ``finally`` never ran) is
  pruned at each scrape (``mark_process_dead`` for its pid).
- Counters and histograms of exited processes stay (they are totals); the
  folder keeps a few small files per job process until the worker restarts.
"""

from __future__ import annotations

import glob
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
    start_http_server,
    values,
)
from prometheus_client.metrics_core import Metric

from agent.core import ALL, Bus, Subscription
from agent.core.messages import (
    LATENCY_STAGES,
    AgentSpeechStarted,
    AmdCompleted,
    AmdPrediction,
    CallAnswered,
    CallEnded,
    CallStarted,
    GuardrailEvaluated,
    TurnLatency,
    UserSpeechStarted,
    UserSpeechStopped,
)

logger = logging.getLogger("agent.app.metrics")

__all__ = [
    "CallMetrics",
    "ObservedCall",
    "get_metrics",
    "metrics_port",
    "observe_call",
    "reset_metrics",
    "serve_metrics",
    "shutdown_metrics",
    "track_call",
]

PORT_ENV = "CALLRT_METRICS_PORT"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: response and AMD times: a good reply lands in 0.3-1 s; AMD may wait for a beep
RESPONSE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
AMD_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0)
#: rule checks take milliseconds, model checks up to a few seconds
GUARDRAIL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: one stage of a reply takes 10 ms (a playout buffer) to a few seconds (a slow model)
STAGE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


class CallMetrics:
    """The ``callrt_*`` metric objects, registered in one registry.

    Args:
        registry: where to register them (prometheus_client's default registry
            unless given; tests pass a fresh ``CollectorRegistry``).
    """

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.calls = Counter(
            "callrt_calls", "Calls that ended, by disposition", ["disposition"], registry=registry
        )
        self.active_calls = Gauge(
            "callrt_active_calls",
            "Calls in progress",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.amd_decisions = Counter(
            "callrt_amd_decisions", "AMD's final category per call", ["category"], registry=registry
        )
        self.amd_decision_seconds = Histogram(
            "callrt_amd_decision_seconds",
            "Seconds from the end of the callee speech AMD's decision followed "
            "(from the answer when none had ended) to the decision",
            buckets=AMD_BUCKETS,
            registry=registry,
        )
        self.guardrail_actions = Counter(
            "callrt_guardrail_actions",
            "Guardrail evaluations",
            ["hook", "action"],
            registry=registry,
        )
        self.guardrail_seconds = Histogram(
            "callrt_guardrail_seconds",
            "Guardrail evaluation latency, by hook",
            ["hook"],
            buckets=GUARDRAIL_BUCKETS,
            registry=registry,
        )
        self.response_seconds = Histogram(
            "callrt_response_seconds",
            "Seconds from the end of callee speech to the agent's first audio, per answered turn",
            buckets=RESPONSE_BUCKETS,
            registry=registry,
        )
        self.stage_seconds = Histogram(
            "callrt_stage_seconds",
            "Seconds each stage of a reply added between the end of a callee turn and the "
            "agent's first audio (stages sum to 'total'), per answered turn, wall clock only",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=registry,
        )
        for stage in (*LATENCY_STAGES, "total"):
            self.stage_seconds.labels(stage=stage)  # every series exists from the start


class ObservedCall:
    """One call's contribution to the metrics, updated as its bus messages arrive.

    Made by :func:`observe_call`. The call counts as active from :meth:`start`
    (or its ``call_started`` message) until its ``call_ended`` message or
    :meth:`close`, whichever comes first: the gauge goes down exactly once.
    """

    def __init__(self, metrics: CallMetrics) -> None:
        self.metrics = metrics
        #: the call's disposition once counted
        self.disposition: str | None = None
        self._state = "idle"  # idle -> active -> done
        self._answered_at: float | None = None
        # the same measure as CallObserver.latencies: a callee speech end waiting for a reply
        self._awaiting_reply_since: float | None = None
        self._speech_stop: float | None = None
        #: AMD stage changes: (prediction time, seconds since the speech it followed)
        self._amd_changes: list[tuple[float, float]] = []
        self._amd_counted = False
        self._subscription: Subscription | None = None

    def attach(self, bus: Bus) -> None:
        """Subscribe to every message of the call's bus."""
        self._subscription = bus.subscribe(ALL, self.on_message)

    def start(self) -> None:
        """Count the call as active (once; never after it ended)."""
        if self._state == "idle":
            self._state = "active"
            self.metrics.active_calls.inc()

    def _finish(self) -> None:
        if self._state == "active":
            self.metrics.active_calls.dec()
        self._state = "done"

    def close(self, *, failed: bool = False) -> None:
        """Stop observing; the call is no longer active.

        Args:
            failed: the call's body raised; a call that never reported its end
                is then counted with disposition ``error``.
        """
        if self._subscription is not None:
            self._subscription.cancel()
            self._subscription = None
        if failed and self.disposition is None:
            self._count_disposition("error")
        self._finish()

    def _count_disposition(self, disposition: str) -> None:
        self.disposition = disposition
        self.metrics.calls.labels(disposition=disposition).inc()

    def on_message(self, msg: Any) -> None:
        """Update the metrics with one bus message."""
        m = self.metrics
        match msg:
            case CallStarted():
                self.start()
            case CallAnswered(at=at):
                self._answered_at = at
            case UserSpeechStarted():
                self._awaiting_reply_since = None
            case UserSpeechStopped(at=at):
                self._speech_stop = self._awaiting_reply_since = at
            case AgentSpeechStarted(at=at):
                if self._awaiting_reply_since is not None:
                    m.response_seconds.observe(max(0.0, at - self._awaiting_reply_since))
                    self._awaiting_reply_since = None
            case AmdPrediction(changed=True, at=at, delay=delay):
                seconds = delay if delay is not None else self._since_speech(at)
                if seconds is not None:
                    self._amd_changes.append((at, seconds))
            case AmdCompleted(category=category, decided_at=decided_at):
                if not self._amd_counted:
                    self._amd_counted = True
                    m.amd_decisions.labels(category=category).inc()
                    seconds = self._decision_seconds(decided_at)
                    if seconds is not None:
                        m.amd_decision_seconds.observe(seconds)
            case TurnLatency(clock="wall"):
                for stage, seconds in msg.stages().items():
                    m.stage_seconds.labels(stage=stage).observe(seconds)
                m.stage_seconds.labels(stage="total").observe(msg.total())
            case GuardrailEvaluated(hook=hook, action=action, latency=latency):
                m.guardrail_actions.labels(hook=hook, action=action).inc()
                m.guardrail_seconds.labels(hook=hook).observe(latency)
            case CallEnded(disposition=disposition):
                if self.disposition is None:
                    self._count_disposition(disposition)
                self._finish()

    def _since_speech(self, t: float) -> float | None:
        """Seconds from the last callee speech end (else the answer) to ``t``."""
        base = self._speech_stop if self._speech_stop is not None else self._answered_at
        return None if base is None else max(0.0, t - base)

    def _decision_seconds(self, decided_at: float | None) -> float | None:
        # the decision is the stage change made at ``decided_at`` (a provisional
        # "person" confirmed later keeps its own time)
        if decided_at is None:
            return None
        for at, seconds in reversed(self._amd_changes):
            if abs(at - decided_at) < 1e-6:
                return seconds
        if self._answered_at is None:
            return None
        return max(0.0, decided_at - self._answered_at)


def observe_call(bus: Bus, metrics: CallMetrics) -> ObservedCall:
    """Subscribe to every message of a call's bus and update ``metrics`` from them.

    Args:
        bus: the call's bus (subscribe before the call starts publishing).
        metrics: the metric objects to update (:func:`get_metrics` in a worker).

    Returns:
        The call's handle; :meth:`ObservedCall.close` it when the call is over
        (or use :func:`track_call`).
    """
    call = ObservedCall(metrics)
    call.attach(bus)
    return call


@contextmanager
def track_call(bus: Bus, metrics: CallMetrics) -> Iterator[ObservedCall]:
    """Observe a call for its whole body: active on entry, inactive on exit, whatever happens.

    A body that raises before the call reported its end counts as disposition
    ``error``.
    """
    call = observe_call(bus, metrics)
    call.start()
    failed = False
    try:
        yield call
    except Exception:
        failed = True
        raise
    finally:
        call.close(failed=failed)


_metrics: CallMetrics | None = None


def get_metrics() -> CallMetrics:
    """This process's metric objects, made on first use (after the multiprocess folder is set).

    They live in a private registry: in multiprocess mode the endpoint reads
    every process's values from the folder, never this registry.
    """
    global _metrics
    if _metrics is None:
        if os.environ.get(MULTIPROC_ENV) and values.ValueClass is values.MutexValue:
            # prometheus_client was imported before the folder was set
            values.ValueClass = values.get_value_class()
        _metrics = CallMetrics(CollectorRegistry())
    return _metrics


def reset_metrics() -> None:
    """Forget this process's metric objects (tests); the next :func:`get_metrics` makes new ones."""
    global _metrics
    _metrics = None


def metrics_port(env: Mapping[str, str] | None = None) -> int | None:
    """``CALLRT_METRICS_PORT`` as a port (None when unset); a bad value raises ValueError."""
    raw = (env if env is not None else os.environ).get(PORT_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise ValueError(f"{PORT_ENV}: expected a port from 0 to 65535, got {raw!r}")
    return int(raw)


class _JobProcessCollector:
    """Every process's values from the multiprocess folder, dead processes' live gauges pruned."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterable[Metric]:
        for f in glob.glob(os.path.join(self.path, "gauge_live*_*.db")):
            pid = os.path.basename(f)[: -len(".db")].rsplit("_", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                multiprocess.mark_process_dead(int(pid), self.path)
        return multiprocess.MultiProcessCollector(None, self.path).collect()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    return True


_servers: list[Any] = []


def serve_metrics(port: int, host: str = "0.0.0.0") -> str:
    """Serve ``/metrics`` for every process of this worker, from a daemon thread.

    Call it in the worker's main process before livekit starts job processes:
    it sets ``PROMETHEUS_MULTIPROC_DIR`` (see the module docstring).

    Args:
        port: the port (0 picks a free one).
        host: the address to listen on.

    Returns:
        The endpoint's local URL.

    Raises:
        OSError: the port cannot be bound (the message names ``CALLRT_METRICS_PORT``).
    """
    path = os.environ.get(MULTIPROC_ENV) or tempfile.mkdtemp(prefix="callrt-metrics-")
    os.makedirs(path, exist_ok=True)
    os.environ[MULTIPROC_ENV] = path
    registry = CollectorRegistry()
    registry.register(_JobProcessCollector(path))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise OSError(f"{PORT_ENV}: cannot serve on port {port}: {exc}") from exc
    _servers.append(server)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    logger.info("metrics endpoint listening", extra={"port": server.server_port, "dir": path})
    return url


def shutdown_metrics() -> None:
    """Stop the endpoints :func:`serve_metrics` started (tests, a clean exit)."""
    while _servers:
        server = _servers.pop()
        server.shutdown()
        server.server_close()
