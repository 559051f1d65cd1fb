"""Every agent config inherits the built-in defaults; dropping the default guardrails is explicit.

Regression for ``configs/agents/reminder.yaml`` (the demo campaign's agent),
which ran with no guardrails at all because it has no ``guardrails:`` section.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from agent.app.call import ModelSet
from agent.app.chat import ChatSession
from agent.app.cli.main import app
from agent.app.config import (
    DEFAULT_CONFIG,
    ConfigError,
    load_config,
    load_layers,
    warn_dropped_checks,
)
from agent.core import clock
from agent.models.estimate_tts import EstimateTTS
from agent.telephony.sim.io import TranscriptFeedSTT
from tests.fakes.models import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
REMINDER = ROOT / "configs" / "agents" / "reminder.yaml"
DEFAULT_CHECKS = ["abuse", "injection", "handoff", "no_sensitive_data"]
SHIPPED = sorted(
    [
        *(ROOT / "configs").glob("*.yaml"),
        *(ROOT / "configs" / "agents").glob("*.yaml"),
        *(ROOT / "configs" / "campaigns").glob("*.yaml"),
        *(ROOT / "configs" / "demo").glob("*.yaml"),
    ]
)


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _checks(path: Path | None) -> list[str]:
    return [c.name for c in load_config(path).guardrails.checks]


def test_the_reminder_agent_runs_with_the_default_guardrails() -> None:
    config = load_config(REMINDER)
    assert [c.name for c in config.guardrails.checks] == DEFAULT_CHECKS
    assert config.name == "reminder"  # its own keys still win
    assert config.amd.enabled and config.turn.min_endpointing_delay == 0.9


def test_chat_with_the_reminder_agent_stops_an_abusive_turn() -> None:
    """What ``chat --agent configs/agents/reminder.yaml`` does with an insult."""
    llm = ScriptedLLM(lambda _ctx: "Sure, happy to help.")
    models = ModelSet(
        stt=TranscriptFeedSTT(),
        llm=llm,
        tts=EstimateTTS(sample_rate=16000),
        vad=None,
        turn_detection="stt",
    )

    async def main() -> tuple[str, list[str], list[str]]:
        chat = ChatSession(load_config(REMINDER), models)
        await chat.start()
        reply = await chat.send("you are a useless idiot")
        await asyncio.sleep(3.0)
        await chat.close()
        said = [m.text for m in chat.messages if m.kind == "agent_turn_completed"]
        blocked = [m.hook for m in chat.messages if getattr(m, "action", None) == "block"]
        return reply.outcome, said, blocked

    outcome, said, blocked = clock.run(main())
    assert outcome == "no_reply"  # the LLM is not asked to answer the insult
    assert said == ["Sure, happy to help.", "I want to help, but please keep it respectful."]
    assert blocked == ["on_user_turn"]


def test_a_mapping_merges_and_a_list_replaces(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {"models": {"llm": "openai/gpt-4.1-mini"}, "guardrails": {"packs": ["/tmp/packs"]}},
    )
    config = load_config(path)
    assert config.models.llm == "openai/gpt-4.1-mini"
    assert config.models.stt == "local/whisper-tiny.en"  # the rest of models: kept
    assert config.guardrails.packs == ["/tmp/packs"]
    assert config.guardrails.model == "learned" and config.guardrails.timeout == 1.0


def test_checks_extend_the_defaults_by_name(tmp_path: Path) -> None:
    mine = {
        "hook": "on_user_turn",
        "name": "abuse",
        "decisions": ["abusive"],
        "rules": [{"when": "abusive >= 0.9", "action": "block", "say": "Bye."}],
    }
    extra = {"hook": "on_agent_turn", "name": "audit", "decisions": ["sensitive_data"]}
    config = load_config(_write(tmp_path, {"guardrails": {"checks": [mine, extra]}}))
    assert [c.name for c in config.guardrails.checks] == [*DEFAULT_CHECKS, "audit"]
    assert config.guardrails.checks[0].rules[0].say == "Bye."  # replaced in place


@pytest.mark.parametrize(
    "guardrails",
    [{"inherit": False}, {"checks": []}],
    ids=["inherit-false", "empty-checks"],
)
def test_dropping_the_default_checks_is_explicit_and_logs_a_warning(
    tmp_path: Path, guardrails: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, {"name": "bare", "guardrails": guardrails})
    with caplog.at_level(logging.WARNING, logger="agent.app.config"):
        assert _checks(path) == []
    [warning] = [r for r in caplog.records if "drops the default guardrail" in r.getMessage()]
    assert warning.file == str(path)  # type: ignore[attr-defined]


def test_a_config_that_keeps_the_defaults_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.app.config"):
        load_config(REMINDER)
        load_config()
    assert not caplog.records


def test_a_config_that_restates_every_default_check_drops_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    default = yaml.safe_load(DEFAULT_CONFIG.read_text())["guardrails"]["checks"]
    path = _write(tmp_path, {"guardrails": {"inherit": False, "checks": default}})
    with caplog.at_level(logging.WARNING, logger="agent.app.config"):
        assert _checks(path) == DEFAULT_CHECKS
    assert not caplog.records
    assert not load_layers(path).opted_out


def test_dropping_some_default_checks_names_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    default = yaml.safe_load(DEFAULT_CONFIG.read_text())["guardrails"]["checks"]
    path = _write(tmp_path, {"guardrails": {"inherit": False, "checks": default[:2]}})
    with caplog.at_level(logging.WARNING, logger="agent.app.config"):
        load_config(path)
    [warning] = caplog.records
    assert warning.dropped == ["handoff", "no_sensitive_data"]  # type: ignore[attr-defined]
    assert str(path) in warning.getMessage()


def test_warn_false_defers_the_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path, {"guardrails": {"checks": []}})
    with caplog.at_level(logging.WARNING, logger="agent.app.config"):
        config = load_config(path, warn=False)
        assert not caplog.records
        warn_dropped_checks(config, source=str(path))
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    ("checks", "key"),
    [
        ([{"hook": "on_sentence", "decisions": ["abusive"]}], "guardrails.checks.0.hook"),
        (
            [
                {"name": "abuse", "hook": "on_user_turn", "decisions": ["abusive"]},
                {"name": "x", "hook": "on_user_turn", "decisions": ["abusive"], "eager": 3},
            ],
            "guardrails.checks.1.eager",
        ),
        (
            [{"name": "abuse", "hook": "on_user_turn", "decisions": ["abusive"], "nope": 1}],
            "guardrails.checks.0.nope",
        ),
    ],
    ids=["appended", "appended-after-a-replaced-one", "replaced-in-place"],
)
def test_an_error_in_a_files_check_names_the_index_the_file_wrote(
    tmp_path: Path, checks: list[dict[str, Any]], key: str
) -> None:
    """The file's checks follow the four default ones, but the user wrote index 0."""
    path = _write(tmp_path, {"guardrails": {"checks": checks}})
    with pytest.raises(ConfigError) as info:
        load_config(path)
    where, said, _ = str(info.value).split(": ", 2)
    assert where.startswith(f"{path}:") and said == key
    line = int(where.rsplit(":", 1)[1])
    assert path.read_text().splitlines()[line - 1].lstrip(" -").split(":")[0] in key


def test_a_guardrails_section_of_the_wrong_shape_names_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("guardrails: [abuse]\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: guardrails: expected a mapping"):
        load_config(path)
    path.write_text("guardrails: {inherit: maybe}\n")
    with pytest.raises(ConfigError, match=r"guardrails.inherit: expected true or false"):
        load_config(path)


def test_sources_name_default_file_environment_and_built_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CALLRT_MODELS__LLM", "openai/gpt-4.1-mini")
    rows = {key: (value, source) for key, value, source in load_layers(REMINDER).sources()}
    assert rows["name"] == ('"reminder"', "file")
    assert rows["models.llm"] == ('"openai/gpt-4.1-mini"', "environment")
    assert rows["models.stt"][1] == "default"
    assert rows["opening_instructions"][1] == "built-in"
    assert rows["guardrails.checks[no_sensitive_data]"][1] == "default"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_config_show_works_on_every_shipped_config(path: Path) -> None:
    result = CliRunner().invoke(app, ["config", "show", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    keys = {r["key"]: r for r in rows}
    assert "guardrails.checks[no_sensitive_data]" in keys
    assert {r["source"] for r in rows} <= {"default", "file", "environment", "built-in", "call"}


def test_config_show_without_a_file_is_the_default_and_warns_on_opt_out(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 0
    assert str(DEFAULT_CONFIG.name) in result.stdout.splitlines()[0]
    bare = _write(tmp_path, {"guardrails": {"inherit": False}})
    result = CliRunner().invoke(app, ["config", "show", str(bare)])
    assert result.exit_code == 0
    assert "drops the default guardrail checks" in result.stderr
