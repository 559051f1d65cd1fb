"""``python -m agent worker``: a LiveKit agent worker that runs calls with explicit dispatch.

The worker registers with the LiveKit server under an agent name
(``CALLRT_AGENT_NAME``, default ``callrt``); jobs reach it only when dispatched
to that name:

- **inbound**: a SIP dispatch rule creates a room per call and dispatches the
  agent; the caller's SIP participant is already in the room (the job has no
  metadata, or metadata without a number);
- **outbound**: ``python -m agent dial`` (or a campaign) creates a room and
  dispatches the agent with a :class:`~agent.telephony.livekit.api.DialJob` as
  metadata; the worker dials the number over the SIP trunk.

Both run the same composition as a replay (:func:`agent.app.call.run_call`), with
the room as the session's line (:class:`~agent.telephony.livekit.line.LiveKitLine`).
Models are built once per job process and shared by the calls it runs; each
job's room is deleted when its call ends. With ``CALLRT_GUARDIAN_PORT`` set the
worker's main process serves the guardian endpoint (one desk for every call):
livekit runs each job in its own process, and those ask through the endpoint
(:class:`~agent.trust.guardian_remote.RemoteGuardianDesk`). With ``CALLRT_METRICS_PORT``
set it serves Prometheus metrics of every job's call (:mod:`agent.app.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from agent.app.call import ModelSet, run_call
from agent.app.config import AgentConfig, load_config
from agent.app.metrics import get_metrics, metrics_port, serve_metrics, track_call
from agent.campaigns.dispatch import record_campaign_call
from agent.core import Bus
from agent.replay.observer import CallObserver
from agent.telephony.livekit.api import DialJob, LiveKitSettings, LiveKitTelephony
from agent.trust.desk import GuardianDesk
from agent.trust.guardian_remote import RemoteGuardianDesk

logger = logging.getLogger("agent.app.worker")

__all__ = [
    "WorkerState",
    "build_server",
    "config_for_job",
    "caller_of",
    "job_of",
    "guardian_port",
    "serve_guardian",
    "serve_metrics_from_env",
]

SIP_PHONE_NUMBER = "sip.phoneNumber"
#: where the job processes find the worker's guardian endpoint (set by the worker)
DESK_URL_ENV = "CALLRT_GUARDIAN_DESK_URL"


def config_for_job(job: DialJob | None, default: Path | None) -> AgentConfig:
    """The agent config a job names (a file path), else the worker's default."""
    if job is not None and job.agent_config not in ("", "default"):
        config = load_config(job.agent_config)
    else:
        config = load_config(default)
    if job is not None and job.variables:
        config = config.with_variables(job.variables)
    return config


def job_of(metadata: str) -> DialJob | None:
    """The outbound dial job in a dispatch's metadata; None (inbound) when it has no number."""
    import json

    text = metadata.strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or "number" not in data:
        return None  # a dispatch rule's own metadata: an inbound call
    return DialJob.from_metadata(text)


def caller_of(attributes: dict[str, str]) -> str | None:
    """The caller's number from an inbound SIP participant's attributes (None if absent)."""
    number = attributes.get(SIP_PHONE_NUMBER, "").strip()
    return number or None


class WorkerState:
    """What a worker process shares across its calls: settings, models, the guardian desk."""

    def __init__(self, settings: LiveKitSettings, *, config_path: Path | None) -> None:
        self.settings = settings
        self.config_path = config_path
        self._desk: Any = None
        self._models: ModelSet | None = None

    @property
    def desk(self) -> Any:
        """This process's guardian desk: the worker's endpoint when it serves one."""
        if self._desk is None:
            url = os.environ.get(DESK_URL_ENV, "").strip()
            token = os.environ.get("CALLRT_GUARDIAN_TOKEN") or None
            self._desk = RemoteGuardianDesk(url, token=token) if url else GuardianDesk()
        return self._desk

    def models(self, config: AgentConfig) -> ModelSet:
        if self._models is None:
            from agent.app.guarding import GuardrailFactory
            from agent.models.registry import build_llm, build_stt, build_tts, build_vad

            m = config.models
            main_llm = build_llm(m.llm, base_url=m.llm_base_url, **m.llm_options)
            session_vad = build_vad(m.vad, min_silence_duration=config.turn.vad_min_silence)
            self._models = ModelSet(
                stt=build_stt(m.stt, vad=session_vad, **m.stt_options),
                llm=main_llm,
                tts=build_tts(m.tts, sample_rate=m.tts_sample_rate),
                vad=session_vad,
                turn_detection="vad",
                speech_end_offset=config.turn.vad_min_silence,
                guardrails=GuardrailFactory(session_llm=main_llm, base_url=m.llm_base_url),
            )
        return self._models

    async def run_job(self, ctx: Any) -> None:
        """One dispatched job: one call, inbound or outbound, in the job's room."""
        from livekit import rtc

        from agent.app.call import new_call_id
        from agent.telephony.livekit.line import LiveKitLine

        job = job_of(ctx.job.metadata or "")
        config = config_for_job(job, self.config_path)
        await ctx.connect()
        telephony = LiveKitTelephony(self.settings)
        call_id = new_call_id()
        try:
            if job is None:
                participant = await ctx.wait_for_participant(
                    kind=rtc.ParticipantKind.PARTICIPANT_KIND_SIP
                )
                identity, caller = participant.identity, caller_of(dict(participant.attributes))
                direction = "inbound"
            else:
                identity = f"callee-{job.contact_id or uuid.uuid4().hex[:8]}"
                caller, direction = None, "outbound"
            line = LiveKitLine(
                room=ctx.room, telephony=telephony, job=job, participant_identity=identity
            )
            bus = Bus(call_id)
            observer = CallObserver()
            observer.attach(bus)
            with track_call(bus, get_metrics()):
                outcome = await run_call(
                    call_id=call_id,
                    bus=bus,
                    direction=direction,  # type: ignore[arg-type]
                    line=line,
                    config=config,
                    models=self.models(config),
                    max_seconds=config.max_call_seconds + 30.0,
                    caller_number=caller,
                    desk=self.desk,
                )
            logger.info(
                "call ended",
                extra={
                    "call_id": call_id,
                    "disposition": outcome.disposition,
                    "direction": direction,
                },
            )
            await line.aclose()
            result = observer.result(call_id)
            write_call_page_from_env(call_id, result, observer.messages)
            if job is not None and job.attempt_id:
                await record_campaign_call(job.attempt_id, call_id, result)
        finally:
            await telephony.hang_up(ctx.room.name)
            await telephony.aclose()


def write_call_page_from_env(call_id: str, result: Any, messages: list[object]) -> Path | None:
    """With ``CALLRT_CALL_PAGES``, write the call's timeline page there (never raises)."""
    folder = os.environ.get("CALLRT_CALL_PAGES", "").strip()
    if not folder:
        return None
    from agent.replay.timeline import CallPage, write_call_page

    try:
        return write_call_page(Path(folder), call_id, CallPage(result, messages))
    except OSError as exc:
        logger.error("cannot write the call page", extra={"call_id": call_id, "error": str(exc)})
        return None


def build_server(state: WorkerState) -> Any:
    """A livekit ``AgentServer`` whose one RTC session is :meth:`WorkerState.run_job`."""
    from livekit.agents import AgentServer

    server = AgentServer(
        ws_url=state.settings.url,
        api_key=state.settings.api_key,
        api_secret=state.settings.api_secret,
    )
    server.rtc_session(state.run_job, agent_name=state.settings.agent_name)
    return server


def guardian_port(env: dict[str, str] | None = None) -> int | None:
    """``CALLRT_GUARDIAN_PORT`` as a port (None when unset); a bad value raises ValueError."""
    raw = (env if env is not None else os.environ).get("CALLRT_GUARDIAN_PORT", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise ValueError(f"CALLRT_GUARDIAN_PORT: expected a port from 0 to 65535, got {raw!r}")
    return int(raw)


def serve_guardian(port: int, *, host: str = "0.0.0.0") -> str:
    """Serve one guardian desk on ``port`` from a daemon thread; returns its local URL.

    The URL is also put in the environment (``CALLRT_GUARDIAN_DESK_URL``) so the
    job processes livekit starts afterwards ask through it.
    """
    from agent.trust.guardian_http import GuardianServer

    started = threading.Event()
    result: dict[str, Any] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        server = GuardianServer(GuardianDesk(), token=os.environ.get("CALLRT_GUARDIAN_TOKEN"))
        try:
            bound = loop.run_until_complete(server.start(host=host, port=port))
            result["url"] = f"http://127.0.0.1:{bound}"
        except Exception as exc:  # reported to the caller below
            result["error"] = exc
        started.set()
        if "url" in result:
            loop.run_forever()

    threading.Thread(target=run, name="guardian-endpoint", daemon=True).start()
    started.wait(10.0)
    if "url" not in result:
        raise OSError(f"CALLRT_GUARDIAN_PORT: cannot serve on port {port}: {result.get('error')}")
    os.environ[DESK_URL_ENV] = result["url"]
    logger.info("guardian endpoint listening", extra={"port": port})
    return str(result["url"])


def serve_metrics_from_env() -> str | None:
    """Serve Prometheus metrics on ``CALLRT_METRICS_PORT`` (None when unset); returns the URL.

    Call it before livekit starts job processes (see :mod:`agent.app.metrics`). A bad
    value raises ValueError, a port that cannot be bound OSError.
    """
    port = metrics_port()
    return None if port is None else serve_metrics(port)
