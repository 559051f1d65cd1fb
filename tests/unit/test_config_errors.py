"""Agent config errors name the true source, its line and a likely key (issue 17).

``CALLRT_MODELS__LLM=local/nope`` used to be reported as
``configs/default.yaml: models.llm: ...``; a misspelt key in a file had no line
and no suggestion, unlike a recorded call's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.app.cli.replay import run_replay
from agent.app.config import DEFAULT_CONFIG, ConfigError, load_config
from agent.app.config_env import env_variable, value_source


@pytest.fixture(autouse=True)
def _no_callrt_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.upper().startswith("CALLRT_"):
            monkeypatch.delenv(name)


def _error(path: Path | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


def test_the_variable_for_a_key_or_a_parent_is_found_in_any_case() -> None:
    env = {"CALLRT_MODELS__LLM": "x", "callrt_turn": "{}", "OTHER": "1"}
    assert env_variable("models.llm", env) == "CALLRT_MODELS__LLM"
    assert env_variable("turn.min_endpointing_delay", env) == "callrt_turn"
    assert env_variable("models.stt", env) is None
    assert value_source("models.stt", "a.yaml", env) == "a.yaml"
    assert value_source("models.llm", "a.yaml", env) == "CALLRT_MODELS__LLM (environment variable)"


def test_a_bad_value_from_the_environment_is_blamed_on_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CALLRT_TURN__MIN_ENDPOINTING_DELAY", "soon")
    message = _error()
    assert message.startswith(
        "CALLRT_TURN__MIN_ENDPOINTING_DELAY (environment variable): turn.min_endpointing_delay:"
    )
    assert str(DEFAULT_CONFIG) not in message


def test_an_unknown_model_from_the_environment_is_blamed_on_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CALLRT_MODELS__LLM", "local/nope")
    code = run_replay(
        [],
        load_config(),
        text_only=True,
        speed=None,
        virtual=True,
        record_dir=None,
        json_out=True,
        config_source=str(DEFAULT_CONFIG),
    )
    assert code == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "CALLRT_MODELS__LLM (environment variable): models.llm: unknown llm model" in message
    assert str(DEFAULT_CONFIG) not in message


def test_a_misspelt_key_gets_its_line_and_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("name: x\nturn:\n  min_endpointing_dely: 0.4\n", encoding="utf-8")
    assert _error(path) == (
        f"{path}:3: turn.min_endpointing_dely: unknown key (did you mean 'min_endpointing_delay'?)"
    )


def test_a_misspelt_top_level_key_and_choice_get_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("name: x\nmodel:\n  llm: local/smollm2-135m\n", encoding="utf-8")
    assert _error(path) == f"{path}:2: model: unknown key (did you mean 'models'?)"
    path.write_text("name: x\n\nturn:\n  end_of_turn: lexicl\n", encoding="utf-8")
    message = _error(path)
    assert message.startswith(f"{path}:4: turn.end_of_turn:")
    assert message.endswith("(did you mean 'lexical'?)")


def test_a_bad_value_in_a_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("name: x\nmax_call_seconds: -3\n", encoding="utf-8")
    assert _error(path).startswith(f"{path}:2: max_call_seconds:")


def test_a_recorded_calls_override_names_the_call_file_and_line(tmp_path: Path) -> None:
    call = tmp_path / "x.call.yaml"
    call.write_text("name: x\nagent:\n  turn:\n    end_of_turn: lexicl\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config().with_overrides({"turn": {"end_of_turn": "lexicl"}}, source=str(call))
    assert str(info.value).startswith(f"{call}:4: agent.turn.end_of_turn:")


@pytest.mark.parametrize(
    ("models", "message", "key"),
    [
        (
            {"stt_options": {"beam": 2}},
            "local/whisper-tiny.en: unknown option(s) beam; expected: ...",
            "models.stt_options",
        ),
        (
            {"stt": "openai/gpt-4o-transcribe", "stt_options": {"beam": 2}},
            "openai/gpt-4o-transcribe: STT.__init__() got an unexpected keyword argument 'beam'",
            "models.stt_options",
        ),
        (
            {"llm_options": {"max_tokenz": 5}},
            "local/smollm2-135m: unknown option(s) max_tokenz; expected: ...",
            "models.llm_options",
        ),
        # no options set: the error is about the model string itself
        ({"stt": "nosuch/stt"}, "unknown stt 'nosuch/stt'", "models.stt"),
    ],
)
def test_a_model_error_names_the_key_it_is_about(
    models: dict[str, object], message: str, key: str
) -> None:
    from agent.app.config import ModelsConfig
    from agent.app.config_env import model_key

    assert model_key(message, ModelsConfig(**models)) == key
