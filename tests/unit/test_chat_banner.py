"""The line ``python -m agent chat`` prints before anything loads, and what ``/help`` lists.

A person starting a chat waits seconds for local weights and the first reply; the
banner is what tells them at once which agent and models they started and how to
get help.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.app.cli.chat import HELP, banner
from agent.app.config import AgentConfig, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    # the banner shows the effective config: a CALLRT_ variable would change it
    for name in list(os.environ):
        if name.startswith("CALLRT_"):
            monkeypatch.delenv(name)


def agent_file(tmp_path: Path, text: str) -> AgentConfig:
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_the_banner_names_the_agent_its_file_the_models_and_help() -> None:
    config = load_config(ROOT / "configs" / "agents" / "front-desk.yaml")
    line = banner(config, "configs/agents/front-desk.yaml")
    assert "\n" not in line
    for needle in (
        f"{config.name!r}",
        "configs/agents/front-desk.yaml",
        f"llm {config.models.llm}",
        f"guardrails {config.guardrails.model}",
        "/help",
        "/quit",
    ):
        assert needle in line


def test_the_banner_names_a_guardrail_fallback_and_says_when_guardrails_are_off(
    tmp_path: Path,
) -> None:
    fallback = agent_file(tmp_path, "guardrails: {model: llm, fallback: rules}\n")
    assert "guardrails llm (fallback rules)" in banner(fallback, "a.yaml")
    off = agent_file(tmp_path, "guardrails: {inherit: false, checks: [], response: []}\n")
    assert "guardrails off" in banner(off, "b.yaml")


def test_help_lists_every_command_the_chat_understands() -> None:
    commands = [line.split()[0] for line in HELP if line.startswith("/")]
    assert commands == ["/help", "/answer", "/dtmf", "/quit"]
