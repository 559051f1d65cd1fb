"""The command line: ``python -m agent ...`` (also installed as ``callrt``).

Exit status: 0 when everything met its expectations, 1 when a replayed call did
not, 2 on bad input (the message names the file, the line or key, and what was
expected).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from .config import DEFAULT_CONFIG, ConfigError, load_config

app = typer.Typer(
    name="callrt",
    help="Telephony voice-agent runtime: replay recorded calls, run the demo.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _parse_speed(value: str) -> float | None:
    if value == "max":
        return None
    try:
        speed = float(value)
    except ValueError:
        raise _fail(f"--speed: expected a positive number or 'max', got {value!r}") from None
    if speed <= 0:
        raise _fail(f"--speed: expected a positive number or 'max', got {value!r}")
    return speed


@app.command()
def replay(
    paths: Annotated[list[Path], typer.Argument(help="*.call.yaml files or folders of them")],
    json_out: Annotated[
        bool, typer.Option("--json", help="one JSON object per call (JSON Lines)")
    ] = False,
    text_only: Annotated[
        bool, typer.Option("--text-only", help="deliver speech as transcripts")
    ] = False,
    speed: Annotated[str, typer.Option(help="N times real time, or 'max'")] = "max",
    real_clock: Annotated[
        bool, typer.Option("--real-clock", help="run on the wall clock (measures real latency)")
    ] = False,
    config: Annotated[Path | None, typer.Option(help="agent config YAML")] = None,
    record_dir: Annotated[
        Path | None, typer.Option("--record-dir", help="write one stereo WAV per call here")
    ] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Replay recorded calls through the runtime and check their expectations."""
    from .logs import setup_logging
    from .replay.loader import RecordedCallError, load_paths

    setup_logging(verbose=verbose, json_logs=False)
    clock_speed = _parse_speed(speed)
    try:
        agent_config = load_config(config)
        calls = load_paths(paths)
    except (ConfigError, RecordedCallError) as exc:
        raise _fail(str(exc)) from None
    from .replay.cli_run import run_replay

    code = run_replay(
        calls,
        agent_config,
        text_only=text_only,
        speed=clock_speed,
        virtual=not real_clock,
        record_dir=record_dir,
        json_out=json_out,
        config_source=str(config or DEFAULT_CONFIG),
    )
    raise typer.Exit(code)


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option(help="run folder (default runs/<timestamp>)")] = None,
    calls_dir: Annotated[
        Path | None, typer.Option("--calls", help="folder of demo calls (default configs/demo)")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="agent config YAML")] = None,
) -> None:
    """Replay the demo calls through the full local stack with audio; write JSONL and WAVs."""
    from .logs import setup_logging
    from .replay.cli_run import run_replay
    from .replay.loader import RecordedCallError, load_paths

    setup_logging(verbose=False, json_logs=False)
    run_dir = out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        agent_config = load_config(config)
        calls = load_paths([calls_dir or DEFAULT_CONFIG.parent / "demo"])
    except (ConfigError, RecordedCallError) as exc:
        raise _fail(str(exc)) from None
    run_dir.mkdir(parents=True, exist_ok=True)
    code = run_replay(
        calls,
        agent_config,
        text_only=False,
        speed=None,
        virtual=True,
        record_dir=run_dir,
        json_out=False,
        jsonl_path=run_dir / "results.jsonl",
        config_source=str(config or DEFAULT_CONFIG),
    )
    Console().print(f"\nresults: {run_dir / 'results.jsonl'}\nrecordings: {run_dir}/*.wav")
    raise typer.Exit(code)


@app.command("models")
def models_cmd() -> None:
    """List the model strings the registry knows."""
    from .models.registry import known_models

    print(json.dumps(known_models(), indent=2))


def main() -> None:
    """Console-script entry point."""
    logging.captureWarnings(True)
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
