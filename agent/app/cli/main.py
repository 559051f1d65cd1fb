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
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from agent.app.cli.style import CallrtTyper, click, one_line_usage_error

app = CallrtTyper(
    name="callrt",
    help="Telephony voice-agent runtime. Recorded calls: replay, demo. Talk to an agent: "
    "chat. Guardrail decisions: decide. Models: models. Agent configs: config. Outbound "
    "campaigns: campaign. Guardian questions: guardian. LiveKit: worker, dial.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"callrt {version('callrt')}")
        except PackageNotFoundError:
            print("callrt (not installed as a package)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Telephony voice-agent runtime."""


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
    paths: Annotated[
        list[Path],
        typer.Argument(help="*.call.yaml files, or folders of them (subfolders are not searched)"),
    ],
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
    report: Annotated[
        Path | None,
        typer.Option("--report", help="write one HTML timeline page per call and an index here"),
    ] = None,
    voices: Annotated[
        str | None,
        typer.Option(
            "--voices",
            help="replay every call once per callee voice, comma-separated: piper, "
            "espeak[:ACCENT[+VARIANT]][:speed=WPM[-WPM]][:pitch=P[-P]] (audio only)",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Replay recorded calls through the runtime and check their expectations."""
    from agent.app.config import DEFAULT_CONFIG, ConfigError, load_config
    from agent.app.logs import setup_logging
    from agent.replay.loader import RecordedCallError, load_paths

    setup_logging(verbose=verbose, json_logs=False)
    clock_speed = _parse_speed(speed)
    run_voices = _parse_voices(voices, text_only=text_only)
    try:
        agent_config = load_config(config, warn=False)
        calls = load_paths(paths)
    except (ConfigError, RecordedCallError) as exc:
        raise _fail(str(exc)) from None
    from agent.app.cli.replay import run_replay

    code = run_replay(
        calls,
        agent_config,
        text_only=text_only,
        speed=clock_speed,
        virtual=not real_clock,
        record_dir=record_dir,
        json_out=json_out,
        config_source=str(config or DEFAULT_CONFIG),
        report_dir=report,
        voices=run_voices,
    )
    raise typer.Exit(code)


def _parse_voices(value: str | None, *, text_only: bool) -> list[str]:
    """``--voices`` as a list of voice strings (empty when not given); bad input exits 2."""
    from agent.telephony.sim.voices import VoiceError, parse_voice

    if value is None:
        return []
    if text_only:
        raise _fail("--voices: --text-only replays synthesise no speech; drop one of the two")
    texts = [v.strip() for v in value.split(",")]
    if not all(texts):
        raise _fail(f"--voices: expected comma-separated voice names, got {value!r}")
    try:
        parsed = [parse_voice(text).text for text in texts]
    except VoiceError as exc:
        raise _fail(f"--voices: {exc}") from None
    if len(set(parsed)) != len(parsed):
        raise _fail(f"--voices: a voice is named twice in {value!r}")
    return parsed


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option(help="run folder (default runs/<timestamp>)")] = None,
    calls_dir: Annotated[
        Path | None, typer.Option("--calls", help="folder of demo calls (default configs/demo)")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="agent config YAML")] = None,
    campaign: Annotated[
        bool, typer.Option(help="also run the demo campaign and write its report")
    ] = True,
) -> None:
    """Replay the demo calls with audio, then run a small demo campaign; write results."""
    from agent.app.cli.replay import run_replay
    from agent.app.config import DEFAULT_CONFIG, ConfigError, load_config
    from agent.app.logs import setup_logging
    from agent.replay.loader import RecordedCallError, load_paths

    setup_logging(verbose=False, json_logs=False)
    run_dir = out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        agent_config = load_config(config, warn=False)
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
    if campaign:
        from agent.campaigns.demo import run_demo_campaign

        Console().print("\n[bold]demo campaign[/bold] (simulated calls, simulated time)")
        campaign_code, html = run_demo_campaign(run_dir, err)
        code = code or campaign_code
        Console().print(f"\ncampaign report: {html}\ncampaign store: {run_dir / 'campaigns.db'}")
    raise typer.Exit(code)


@app.command()
def decide(
    decision: Annotated[
        list[str],
        typer.Option(
            "--decision",
            "-d",
            help="NAME or NAME=PROMPT (repeat); with --model rules or learned NAME picks a "
            "built-in pack",
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            help="rules, learned (rules + classifiers), llm (the config's LLM), "
            "llm:<llm model>, openai/<model>, inference/<provider>/<model>"
        ),
    ] = "rules",
    packs: Annotated[
        list[Path] | None, typer.Option("--packs", help="extra rules-pack folder (repeat)")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="agent config YAML (for --model llm)")] = None,
) -> None:
    """Evaluate decisions on each line of stdin; print one JSON object per line."""
    from agent.app.cli.decide import DecideError, main, parse_decisions
    from agent.app.config import ConfigError, load_config
    from agent.models.registry import (
        ModelConfigError,
        UnknownModelError,
        build_decision_model,
        build_llm,
    )
    from guardrails.rules import PackError, load_packs

    pack_dirs = [str(p) for p in packs or []]
    for p in packs or []:
        if not p.is_dir():
            raise _fail(f"--packs {p}: not a folder of rules packs")
    try:
        by_pack = model in ("rules", "learned")  # a decision's name picks a pack
        names = list(load_packs(pack_dirs)) if by_pack else []
        decisions = parse_decisions(decision, rules=by_pack, pack_names=names)
        session_llm = None
        if model == "llm":
            cfg = load_config(config)
            session_llm = build_llm(
                cfg.models.llm, base_url=cfg.models.llm_base_url, **cfg.models.llm_options
            )
        built = build_decision_model(model, session_llm=session_llm, pack_dirs=pack_dirs)
    except (DecideError, PackError, ConfigError) as exc:
        raise _fail(str(exc)) from None
    except ValueError as exc:  # e.g. learned without its weights
        raise _fail(f"--model: {exc}") from None
    except (UnknownModelError, ModelConfigError) as exc:
        raise _fail(f"--model: {exc}") from None
    main(built, decisions)


@app.command()
def chat(
    agent: Annotated[
        Path | None, typer.Option("--agent", help="agent config YAML (default: the built-in one)")
    ] = None,
    caller: Annotated[
        str | None, typer.Option(help="the caller's number, E.164 (for guardian verification)")
    ] = None,
    voice: Annotated[
        bool,
        typer.Option("--voice", help="treat turns as a phone caller's (strict side effects)"),
    ] = False,
    guardian_port: Annotated[
        int | None,
        typer.Option("--guardian-port", help="also serve guardian questions over HTTP here"),
    ] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Talk to an agent in the terminal, through the same session loop as a phone call."""
    import os

    from agent.app.cli.chat import run_chat
    from agent.app.config import DEFAULT_CONFIG, ConfigError, load_config
    from agent.app.logs import setup_logging
    from agent.models.registry import ModelConfigError, UnknownModelError
    from agent.telephony.phone import PhoneNumberError, parse_e164
    from agent.trust.tools import ToolLoadError, load_tools

    setup_logging(verbose=verbose, json_logs=False)
    try:
        cfg = load_config(agent)
        number = parse_e164(caller) if caller else None
        load_tools(cfg.tools, source=str(agent or DEFAULT_CONFIG))
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    except PhoneNumberError as exc:
        raise _fail(f"--caller: {exc}") from None
    except ToolLoadError as exc:
        raise _fail(str(exc)) from None
    if guardian_port is not None and not 0 <= guardian_port <= 65535:
        raise _fail(f"--guardian-port: expected a port from 0 to 65535, got {guardian_port}")
    try:
        code = run_chat(
            cfg,
            source=str(agent) if agent else "built-in configs/default.yaml",
            caller_number=number,
            channel="voice" if voice else "chat",
            guardian_port=guardian_port,
            guardian_token=os.environ.get("CALLRT_GUARDIAN_TOKEN") or None,
        )
    except (UnknownModelError, ModelConfigError) as exc:
        from agent.app.config_env import model_key, value_source

        key = model_key(str(exc), cfg.models)
        raise _fail(f"{value_source(key, str(agent or DEFAULT_CONFIG))}: {key}: {exc}") from None
    raise typer.Exit(code)


guardian_app = CallrtTyper(
    help="Answer guardian questions a running agent asked ([ASK_GUARDIAN:...]).",
    no_args_is_help=True,
)
app.add_typer(guardian_app, name="guardian")

_URL = typer.Option(
    "--url",
    envvar="CALLRT_GUARDIAN_URL",
    help="the agent's guardian endpoint, e.g. http://host:8089",
)


@guardian_app.command("list")
def guardian_list(url: Annotated[str, _URL]) -> None:
    """List the pending guardian questions (JSON)."""
    import asyncio
    import os

    from agent.trust.guardian_http import GuardianClientError, list_questions

    try:
        questions = asyncio.run(list_questions(url, os.environ.get("CALLRT_GUARDIAN_TOKEN")))
    except GuardianClientError as exc:
        raise _fail(str(exc)) from None
    print(json.dumps(questions, indent=2))


@guardian_app.command("answer")
def guardian_answer(
    question_id: Annotated[str, typer.Argument(help="the question's id (q_...)")],
    answer: Annotated[str, typer.Argument(help="the answer, in words")],
    url: Annotated[str, _URL],
) -> None:
    """Answer one pending guardian question; the held call resumes with it."""
    import asyncio
    import os

    from agent.trust.guardian_http import GuardianClientError, answer_question

    if not answer.strip():
        raise _fail("ANSWER: expected a non-empty answer")
    try:
        done = asyncio.run(
            answer_question(url, question_id, answer, os.environ.get("CALLRT_GUARDIAN_TOKEN"))
        )
    except GuardianClientError as exc:
        raise _fail(str(exc)) from None
    print(json.dumps(done, indent=2))


def _livekit_settings() -> Any:
    from agent.telephony.livekit.api import LiveKitConfigError, LiveKitSettings

    try:
        return LiveKitSettings.from_env()
    except LiveKitConfigError as exc:
        raise _fail(str(exc)) from None


@app.command()
def worker(
    agent: Annotated[
        Path | None, typer.Option("--agent", help="the agent config for inbound calls")
    ] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Run a LiveKit agent worker (explicit dispatch by agent name; see docs/deploy-livekit.md)."""
    from agent.app.config import ConfigError, load_config
    from agent.app.logs import setup_logging
    from agent.app.worker import WorkerState, build_server, guardian_port, serve_guardian

    setup_logging(verbose=verbose, json_logs=True)
    settings = _livekit_settings()
    try:
        load_config(agent)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    try:
        port = guardian_port()
        if port is not None:
            err.print(f"[guardian endpoint: {serve_guardian(port)}]", highlight=False)
    except (ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    from agent.app.worker import serve_metrics_from_env

    try:
        metrics_url = serve_metrics_from_env()
        if metrics_url is not None:
            err.print(f"[metrics endpoint: {metrics_url}]", highlight=False)
    except (ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    server = build_server(WorkerState(settings, config_path=agent))
    from livekit.agents import cli as lk_cli

    # livekit's runner reads its own command from argv
    sys.argv = [sys.argv[0], "start"]
    lk_cli.run_app(server)


@app.command()
def dial(
    number: Annotated[str, typer.Argument(help="the number to call, E.164 (+15551234567)")],
    agent: Annotated[
        Path | None, typer.Option("--agent", help="agent config YAML (a path the worker can read)")
    ] = None,
    caller_id: Annotated[
        str | None, typer.Option("--caller-id", help="the number to show, E.164")
    ] = None,
) -> None:
    """Place one outbound call: create a room and dispatch the worker to dial NUMBER."""
    import asyncio
    import uuid

    from agent.app.config import ConfigError, load_config
    from agent.telephony.livekit.api import DialJob, LiveKitTelephony
    from agent.telephony.phone import PhoneNumberError, parse_e164

    try:
        callee = parse_e164(number)
    except PhoneNumberError as exc:
        raise _fail(f"NUMBER: {exc}") from None
    try:
        shown = parse_e164(caller_id) if caller_id else None
    except PhoneNumberError as exc:
        raise _fail(f"--caller-id: {exc}") from None
    try:
        load_config(agent)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    settings = _livekit_settings()
    if not settings.sip_trunk_id:
        raise _fail("LIVEKIT_SIP_OUTBOUND_TRUNK: expected the outbound SIP trunk id (ST_...)")
    job = DialJob(
        number=callee,
        agent_config=str(agent.resolve()) if agent else "default",
        caller_id=shown,
    )

    async def place() -> dict[str, str]:
        telephony = LiveKitTelephony(settings)
        try:
            room = await telephony.create_room(f"call-{uuid.uuid4().hex[:12]}")
            dispatch_id = await telephony.dispatch(room, job)
            return {"room": room, "dispatch_id": dispatch_id}
        finally:
            await telephony.aclose()

    try:
        placed = asyncio.run(place())
    except Exception as exc:  # the server refused or cannot be reached
        raise _fail(f"{settings.url}: cannot place the call: {type(exc).__name__}: {exc}") from None
    print(json.dumps(placed))


def _campaign_app() -> typer.Typer:
    from agent.app.cli.campaign import campaign_app

    return campaign_app


app.add_typer(_campaign_app(), name="campaign")


@app.command("models")
def models_cmd(
    json_out: Annotated[
        bool, typer.Option("--json", help="the same as JSON: {kind: [model, ...]}")
    ] = False,
) -> None:
    """List every model string: its kind, whether it runs offline, where its weights come from."""
    from rich.table import Table

    from agent.models.catalog import catalog, catalog_json

    if json_out:
        print(json.dumps(catalog_json(), indent=2))
        return
    table = Table(title="model strings (agent config: models.*, guardrails.model)")
    for column in ("model", "kind", "runs", "weights", "what it is"):
        table.add_column(column, overflow="fold")
    for entry in catalog():
        default = " (default)" if entry.default else ""
        table.add_row(entry.model + default, entry.kind, entry.runs, entry.weights, entry.what)
    Console(width=None if sys.stdout.isatty() else 140).print(table)


config_app = CallrtTyper(
    help="Agent configs: the effective values and where each one comes from.",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(
    file: Annotated[
        Path | None, typer.Argument(help="agent config YAML (default: the built-in one)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object per value")] = False,
) -> None:
    """Print the effective config: each value and its source (default, file, environment).

    FILE may be an agent config, a campaign (its agent's config) or a recorded call
    (the default config with the call's ``agent:`` overrides).
    """
    from agent.app.config import ConfigError, load_for_show
    from agent.replay.loader import RecordedCallError

    try:
        loaded = load_for_show(file)
    except (ConfigError, RecordedCallError) as exc:
        raise _fail(str(exc)) from None
    if loaded.opted_out:
        err.print(
            f"[yellow]warning:[/yellow] {escape(loaded.source)} drops the default guardrail "
            "checks (guardrails.inherit: false or checks: [])",
            highlight=False,
            soft_wrap=True,
        )
    rows = loaded.sources()
    if json_out:
        for key, value, source in rows:
            print(json.dumps({"key": key, "value": json.loads(value), "source": source}))
        return
    print(f"# effective config of {loaded.source}")
    if loaded.note:
        print(f"# {loaded.note}")
    width = max(len(key) for key, _, _ in rows)
    for key, value, source in rows:
        print(f"{key.ljust(width)} = {value}  # {source}")


def main() -> None:
    """Console-script entry point: exit 0, 1 (a replayed call failed) or 2 (bad input)."""
    logging.captureWarnings(True)
    try:
        # not standalone: a usage mistake is one line like every other input error
        code = app(standalone_mode=False)
    except click.UsageError as exc:
        if not exc.format_message():  # no arguments: the help was printed
            sys.exit(exc.exit_code)
        err.print(
            f"[red]error:[/red] {escape(one_line_usage_error(exc))}",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)
    except click.ClickException as exc:
        err.print(f"[red]error:[/red] {escape(exc.format_message())}", highlight=False)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
