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


@app.command()
def decide(
    decision: Annotated[
        list[str],
        typer.Option(
            "--decision",
            "-d",
            help="NAME or NAME=PROMPT (repeat); with --model rules NAME picks a built-in pack",
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            help="rules, llm (the config's LLM), llm:<llm model>, openai/<model>, "
            "inference/<provider>/<model>"
        ),
    ] = "rules",
    packs: Annotated[
        list[Path] | None, typer.Option("--packs", help="extra rules-pack folder (repeat)")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="agent config YAML (for --model llm)")] = None,
) -> None:
    """Evaluate decisions on each line of stdin; print one JSON object per line."""
    from guardrails.rules import PackError, load_packs

    from .decide_cli import DecideError, main, parse_decisions
    from .models.registry import (
        ModelConfigError,
        UnknownModelError,
        build_decision_model,
        build_llm,
    )

    pack_dirs = [str(p) for p in packs or []]
    for p in packs or []:
        if not p.is_dir():
            raise _fail(f"--packs {p}: not a folder of rules packs")
    try:
        names = list(load_packs(pack_dirs)) if model == "rules" else []
        decisions = parse_decisions(decision, rules=model == "rules", pack_names=names)
        session_llm = None
        if model == "llm":
            cfg = load_config(config)
            session_llm = build_llm(cfg.models.llm, base_url=cfg.models.llm_base_url)
        built = build_decision_model(model, session_llm=session_llm, pack_dirs=pack_dirs)
    except (DecideError, PackError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    except (UnknownModelError, ModelConfigError) as exc:
        raise _fail(f"--model: {exc}") from None
    main(built, decisions)


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
