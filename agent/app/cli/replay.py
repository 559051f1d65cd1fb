"""Runs a replay from the CLI: progress, summary table, JSON Lines, exit status."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.app.call import ModelSet
from agent.app.config import AgentConfig, ConfigError, warn_dropped_checks
from agent.app.config_env import model_key, value_source
from agent.core import clock
from agent.core.messages import CallStarted
from agent.models.registry import ModelConfigError, UnknownModelError
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions, voice_problem
from agent.telephony.sim.recorded_call import RecordedCall
from guardrails.response import ResponseGuardrailError
from guardrails.rules import PackError

__all__ = ["run_replay"]


def run_replay(
    calls: list[RecordedCall],
    config: AgentConfig,
    *,
    text_only: bool,
    speed: float | None,
    virtual: bool,
    record_dir: Path | None,
    json_out: bool,
    jsonl_path: Path | None = None,
    config_source: str = "config",
    report_dir: Path | None = None,
    voices: list[str] | None = None,
) -> int:
    """Replay ``calls``; returns the exit status (0 all ok, 1 any failed, 2 bad input).

    With ``voices`` (audio only) every call is replayed once per voice, all calls in
    the first voice first; with more than one, each voice's recordings and pages go
    to a subfolder of ``record_dir`` and ``report_dir`` named after the voice.
    """
    # when piped, rich assumes 80 columns and truncates call names: give the table room
    stream = sys.stderr if json_out else sys.stdout
    console = Console(stderr=json_out, width=None if stream.isatty() else 120)
    errors = Console(stderr=True, soft_wrap=True)
    if report_dir is not None and record_dir is None and not text_only:
        # the pages play and draw each call's recording
        record_dir = report_dir / "recordings"
    options = ReplayOptions(text_only=text_only, record_dir=record_dir)
    pages: list[tuple[Path, Any]] = []
    replayer = Replayer(config, options)
    passes: list[str | None] = list(voices or []) or [None]
    if not text_only:
        problem = voice_problem(calls, voices or [])
        if problem:
            errors.print(f"[red]error:[/red] {escape(problem)}", highlight=False)
            return 2
    # check every call's `agent:` overrides before anything runs: bad input exits 2
    guarded: list[tuple[str, AgentConfig]] = [(config_source, config)]
    for call in calls:
        source = str(call.source_path or call.name)
        try:
            overridden = config.with_overrides(call.agent, source=source)
        except ConfigError as exc:
            errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            return 2
        if any(call.agent.get(k) for k in ("guardrails", "tools", "tool_gate", "watchdog")):
            guarded.append((source, overridden))
    try:
        models = replayer.models()
    except (UnknownModelError, ModelConfigError) as exc:
        key = model_key(str(exc), config.models)
        where = value_source(key, config_source)
        errors.print(f"[red]error:[/red] {escape(f'{where}: {key}: {exc}')}", highlight=False)
        return 2
    # the guardrail's models and response guardrails start now: bad ones exit 2 here
    for source, cfg in guarded if models.guardrails is not None else []:
        assert models.guardrails is not None
        try:
            models.guardrails.decision_model(cfg.guardrails)
            models.guardrails.response(cfg.guardrails)
        except (UnknownModelError, ModelConfigError, PackError) as exc:
            key = (
                "guardrails.fallback"
                if cfg.guardrails.fallback and (cfg.guardrails.fallback in str(exc))
                else "guardrails.model"
            )
            if isinstance(exc, PackError):
                key = "guardrails.packs"
            where = value_source(key, source) if source == config_source else source
            errors.print(f"[red]error:[/red] {escape(f'{where}: {key}: {exc}')}", highlight=False)
            return 2
        except ResponseGuardrailError as exc:
            errors.print(f"[red]error:[/red] {escape(f'{source}: {exc}')}", highlight=False)
            return 2
    for source, cfg in guarded:
        problem = check_controls(cfg, models, source=source)
        if problem:
            errors.print(f"[red]error:[/red] {escape(problem)}", highlight=False)
            return 2
    # the config is good and its models are built: now say that it opts out of defaults
    warn_dropped_checks(config, source=config_source)
    results: list[ReplayedCall] = []
    jsonl = jsonl_path.open("w", encoding="utf-8") if jsonl_path else None

    progress = Progress(
        TextColumn("[bold]replay[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=json_out or not sys.stderr.isatty(),
    )

    pages_dir, recordings_dir = report_dir, record_dir

    async def main() -> list[ReplayedCall]:
        with progress:
            total = len(calls) * len(passes)
            task = progress.add_task(calls[0].name if calls else "", total=total)

            def on_result(call: RecordedCall, replayed: ReplayedCall) -> None:
                results.append(replayed)
                if pages_dir is not None:
                    pages.append(_write_page(pages_dir, call, replayed, recordings_dir))
                line = replayed.result.to_json_line()
                if json_out:
                    print(line, flush=True)
                if jsonl is not None:
                    jsonl.write(line + "\n")
                    jsonl.flush()
                if not json_out:
                    mark = "[green]ok[/green]" if replayed.result.ok else "[red]FAIL[/red]"
                    voice = f" ({replayed.result.voice})" if len(passes) > 1 else ""
                    progress.console.print(f"{mark} {escape(call.name + voice)}", highlight=False)
                progress.update(task, advance=1)

            nonlocal pages_dir, recordings_dir
            done: list[ReplayedCall] = []
            for voice in passes:
                options.voice = voice
                if len(passes) > 1 and voice is not None:
                    sub = voice_folder(voice)
                    pages_dir = report_dir / sub if report_dir is not None else None
                    recordings_dir = record_dir / sub if record_dir is not None else None
                    options.record_dir = recordings_dir
                done += await replayer.replay_all(calls, on_result)
            return done

    try:
        clock.run(main(), virtual=virtual, speed=speed)
    finally:
        if jsonl is not None:
            jsonl.close()
    if not json_out:
        console.print(_summary(results))
        for line in _failure_lines(results):
            console.print(line, markup=False, highlight=False)
    if report_dir is not None:
        from agent.replay.timeline import write_suite_index

        for voice in passes:
            folder = report_dir
            mine = pages
            if len(passes) > 1 and voice is not None:
                folder = report_dir / voice_folder(voice)
                mine = [page for page in pages if page[0].parent.parent == folder]
            index = write_suite_index(folder, mine)
            errors.print(f"report: {index}", highlight=False, markup=False)
    return 0 if all(r.result.ok for r in results) else 1


def voice_folder(voice: str) -> str:
    """A folder name for a voice string: ``espeak:en-gb+f4`` -> ``espeak_en-gb_f4``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", voice)


def _write_page(
    report_dir: Path, call: RecordedCall, replayed: ReplayedCall, record_dir: Path | None
) -> tuple[Path, Any]:
    from agent.replay.timeline import CallPage, write_call_page

    recording = record_dir / f"{call.name}.wav" if record_dir is not None else None
    page = CallPage.of(replayed, recording)
    return write_call_page(report_dir, call.name, page), page


def _failure_lines(results: list[ReplayedCall]) -> list[str]:
    """One line per unmet expectation: ``FAIL call: key: expected X, got Y``."""
    return [
        f"FAIL {r.result.name}: {f.key}: expected {_shown(f.expected)}, got {_shown(f.actual)}"
        for r in results
        for f in r.result.failures
    ]


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _amd_cell(replayed: ReplayedCall) -> str:
    started = next((m for m in replayed.messages if isinstance(m, CallStarted)), None)
    if started is not None and started.direction == "inbound":
        return "n/a"  # AMD runs on outbound calls only
    return replayed.result.amd.category if replayed.result.amd else "-"


def _summary(results: list[ReplayedCall]) -> Table:
    table = Table(title="replay summary")
    table.add_column("call", no_wrap=True)
    for col in ("ok", "disposition", "amd", "turns", "first audio", "duration", "x real"):
        table.add_column(col)
    for r in results:
        res = r.result
        first = f"{res.agent_first_audio_at:.2f}s" if res.agent_first_audio_at is not None else "-"
        speedup = f"{res.duration / r.wall_seconds:.1f}" if r.wall_seconds > 0 else "-"
        table.add_row(
            res.name,
            "[green]yes[/green]"
            if res.ok
            else "[red]no[/red]: " + ", ".join(f.key for f in res.failures),
            res.disposition,
            _amd_cell(r),
            str(len(res.turns)),
            first,
            f"{res.duration:.1f}s",
            speedup,
        )
    return table


def check_controls(cfg: AgentConfig, models: ModelSet, *, source: str) -> str | None:
    """Import the config's tools and build its gate and watchdog models: a problem, or None."""
    from agent.app.guarding import GuardrailFactory
    from agent.trust.tools import ToolLoadError, load_tools

    try:
        load_tools(cfg.tools, source=source)
    except ToolLoadError as exc:
        return str(exc)
    factory = models.guardrails or GuardrailFactory(session_llm=models.llm)
    for key, spec in (
        ("tool_gate.model", cfg.tool_gate.model),
        ("watchdog.model", cfg.watchdog.model),
    ):
        try:
            factory.named(spec)
        except (UnknownModelError, ModelConfigError) as exc:
            return f"{source}: {key}: {exc}"
    return None
