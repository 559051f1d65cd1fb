"""``campaign start``: set up the dispatcher and the clock, run the dialer, show progress."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from agent.campaigns.dialer import CampaignClock, Dialer, DialerError, default_dialer_id
from agent.campaigns.store import CampaignStore
from agent.core import clock

__all__ = ["StartOptions", "run_start", "build_dispatcher"]

logger = logging.getLogger("agent.campaigns.runner")


@dataclass
class StartOptions:
    """What ``campaign start`` was asked to do (validated by the CLI)."""

    name: str
    db: str
    #: "suites" | "folder" | "instant" | "livekit"
    mode: str = "suites"
    folder: Path | None = None
    suites: list[Path] = field(default_factory=list)
    text_only: bool = True
    seed: int = 0
    simulated_time: bool = True
    sim_seconds: float = 0.0
    out: Path = Path("runs/campaigns")
    dial_log: Path | None = None
    dialer_id: str | None = None


def _recorded_calls(options: StartOptions) -> list[Any]:
    from agent.replay.loader import RecordedCallError, load_paths

    folders = [options.folder] if options.folder else [p for p in options.suites if p.is_dir()]
    if not folders:
        raise ValueError("--simulate: no recorded calls found (pass --simulate DIR)")
    try:
        calls = load_paths(folders)
    except RecordedCallError as exc:
        raise ValueError(str(exc)) from None
    if not calls:
        raise ValueError(f"--simulate: {folders[0]}: no *.call.yaml files")
    return calls


def build_dispatcher(options: StartOptions, spec: Any, store: CampaignStore) -> Any:
    """The dispatcher for ``options.mode``; bad input raises ValueError (one line)."""
    from agent.app.config import DEFAULT_CONFIG, ConfigError, load_config, warn_dropped_checks
    from agent.app.config_env import model_key, value_source
    from agent.campaigns.dispatch import InstantDispatcher, LiveKitDispatcher, SimulatorDispatcher
    from agent.models.registry import ModelConfigError, UnknownModelError

    if options.mode == "instant":
        return InstantDispatcher(seed=options.seed, seconds=options.sim_seconds)
    if options.mode == "livekit":
        from agent.telephony.livekit.api import LiveKitSettings, LiveKitTelephony

        settings = LiveKitSettings.from_env()
        if not settings.sip_trunk_id:
            raise ValueError(
                "LIVEKIT_SIP_OUTBOUND_TRUNK: expected the outbound SIP trunk id (ST_...)"
            )
        timeout = (spec.max_call_seconds or 300.0) + 120.0
        return LiveKitDispatcher(
            LiveKitTelephony(settings),
            store,
            agent_config=spec.agent or "default",
            timeout=timeout,
        )
    calls = _recorded_calls(options)
    try:
        config = load_config(spec.agent, warn=False)
    except ConfigError as exc:
        raise ValueError(f"campaign agent: {exc}") from None
    if spec.max_call_seconds:
        config = config.model_copy(update={"max_call_seconds": spec.max_call_seconds})
    dispatcher = SimulatorDispatcher(
        calls, config, seed=options.seed, text_only=options.text_only, out_dir=options.out
    )
    try:
        dispatcher._base.models()  # load the models now: a bad one is bad input
    except (UnknownModelError, ModelConfigError) as exc:
        key = model_key(str(exc), config.models)
        where = value_source(key, str(spec.agent or DEFAULT_CONFIG))
        raise ValueError(f"{where}: {key}: {exc}") from None
    warn_dropped_checks(config, source=str(spec.agent or DEFAULT_CONFIG))
    return dispatcher


def run_start(options: StartOptions, *, console: Console) -> int:
    """Run the campaign's dialer in this process; returns the exit status.

    0 when the run ended or was stopped (a later ``start`` resumes it), 1 when it
    failed (:class:`DialerError`: one error line; the calls it cut are abandoned).
    A store that stays away raises :class:`StoreError` (the CLI names the store).
    """
    from agent.app.cli.campaign import install_signal_stop
    from agent.campaigns.definition import CampaignSpec
    from agent.campaigns.progress import LiveProgress, summary_table

    async def main() -> int:
        store = await CampaignStore.open(options.db, create=False)
        dispatcher = None
        try:
            row = await store.campaign(options.name)
            if row.status in ("done", "cancelled"):
                console.print(f"campaign {options.name} is {row.status}; nothing to dial")
                return 0
            spec = CampaignSpec.from_json(row.spec)
            dispatcher = build_dispatcher(options, spec, store)
            start = await store.summary(options.name)
            progress = LiveProgress(start, console, simulated=options.simulated_time)
            dialer = Dialer(
                store,
                row,
                spec,
                dispatcher,
                CampaignClock(simulated=options.simulated_time),
                dialer_id=options.dialer_id or default_dialer_id(),
                dial_log=options.dial_log,
                on_event=progress.update,
            )
            install_signal_stop(dialer.stop)
            try:
                with progress:
                    status = await dialer.run()
            except DialerError as exc:
                # the run's own failure, not bad input: one line, status 1; -v shows the trace
                logger.info("dialer run failed", exc_info=exc)
                console.print(
                    f"[red]error:[/red] {escape(str(exc))}; "
                    f"`campaign start {options.name}` resumes it",
                    highlight=False,
                    soft_wrap=True,
                )
                return 1
            final = await store.summary(options.name)
            Console().print(summary_table(final))
            if status not in ("done", "cancelled"):
                console.print(f"stopped; `campaign start {options.name}` resumes it")
            return 0
        finally:
            if dispatcher is not None:
                await dispatcher.aclose()
            await store.aclose()

    return clock.run(main(), virtual=options.simulated_time)
