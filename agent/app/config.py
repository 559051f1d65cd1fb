"""Agent configuration: ``configs/*.yaml`` files plus ``CALLRT_*`` environment variables.

Precedence (highest first): a recorded call's ``agent:`` overrides, environment
variables (``CALLRT_MODELS__LLM=openai/gpt-4.1-mini``), the YAML file, the
built-in defaults of ``configs/default.yaml`` (merged as :mod:`agent.app.config_layers`
says: the default guardrails stay unless a file drops them explicitly), and last
the code's own defaults. Models are built once per run, so a call cannot override
``models``. Every error a user can cause names the file, the key and what was expected.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agent.app.config_layers import check_name, merge_layers, value_sources
from agent.controller.prompt_rules import ToolGateConfig, TransferConfig, WatchdogConfig
from agent.telephony.phone import PhoneNumberError, parse_e164
from agent.trust.guardian import GuardianConfig
from agent.trust.tools import ToolSpec
from amd.config import AmdConfig
from guardrails.config import GuardrailsConfig

__all__ = [
    "AgentConfig",
    "ModelsConfig",
    "TurnConfig",
    "ConfigError",
    "load_config",
    "dropped_default_checks",
    "warn_dropped_checks",
    "load_layers",
    "load_for_show",
    "LoadedConfig",
    "DEFAULT_CONFIG",
]

logger = logging.getLogger("agent.app.config")

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"


class ConfigError(ValueError):
    """A configuration problem, as one line naming file and key."""


class ModelsConfig(BaseModel):
    """Which models the session uses, by registry string."""

    model_config = ConfigDict(extra="forbid")
    stt: str = "local/whisper-tiny.en"
    llm: str = "local/smollm2-135m"
    tts: str = "local/piper-joe"
    vad: str = "silero"
    text_only_tts: str = "local/estimate"
    llm_base_url: str | None = None
    #: Options for the LLM: for ``local/...`` fields of ``LlamaOptions`` (``max_tokens``,
    #: ``temperature``); for ``openai/...`` ``openai.LLM`` arguments, e.g.
    #: ``max_completion_tokens``, or ``extra_body: {max_tokens: 120}`` for servers
    #: (like llama.cpp's) that only honour ``max_tokens``.
    llm_options: dict[str, Any] = Field(default_factory=dict)
    #: Options for the STT: for ``local/whisper-tiny.en`` fields of ``WhisperOptions``
    #: (``beam_size``, ``initial_prompt``, ...); for ``openai/...`` ``openai.STT``
    #: arguments.
    stt_options: dict[str, Any] = Field(default_factory=dict)
    tts_sample_rate: int = Field(default=16000, ge=8000, le=48000)


class TurnConfig(BaseModel):
    """How turns are taken on the phone."""

    model_config = ConfigDict(extra="forbid")
    min_endpointing_delay: float = Field(default=0.9, ge=0.0, le=10.0)
    max_endpointing_delay: float = Field(default=1.5, ge=0.0, le=30.0)
    min_interruption_duration: float = Field(default=0.5, ge=0.0, le=10.0)
    #: Silence the VAD needs before it reports the end of speech. The STT runs on
    #: each VAD segment, so a window shorter than ``min_endpointing_delay`` lets
    #: transcription overlap the endpointing wait; the turn still needs
    #: ``min_endpointing_delay`` of silence to be committed.
    vad_min_silence: float = Field(default=0.3, ge=0.05, le=5.0)
    #: How the end of a turn is judged after ``min_endpointing_delay`` of silence:
    #: ``lexical`` waits up to ``max_endpointing_delay`` when the words so far stop
    #: mid-sentence ("move it to ..."); ``silence`` goes by the silence alone.
    end_of_turn: Literal["lexical", "silence"] = "lexical"
    #: Start the reply (LLM and TTS) on the final transcript, before the turn is
    #: committed; it is spoken only if the committed turn is the same.
    preemptive_generation: bool = True


class AgentConfig(BaseSettings):
    """One agent: what it says and does on a call, and the models it uses."""

    model_config = SettingsConfigDict(
        env_prefix="CALLRT_", env_nested_delimiter="__", extra="forbid"
    )

    name: str = "default"
    instructions: str = (
        "You are Sam, a friendly phone assistant. Speak in short, plain sentences. "
        "One or two sentences per reply."
    )
    task: str = "check in with the customer"
    opening_instructions: str = (
        "Greet the person, say you are Sam calling to {task}, and ask one short question."
    )
    inbound_greeting_instructions: str = "Greet the caller briefly and ask how you can help."
    greet_after_silence: float = Field(default=2.0, ge=0.0, le=30.0)
    max_call_seconds: float = Field(default=300.0, gt=0.0)
    #: Who is calling, as said to call screeners and in voicemail messages.
    caller_name: str = Field(default="Sam from Acme", min_length=1)
    #: Why, in a few words; the task when empty.
    call_reason: str = ""
    #: The answer to a call screener ({caller_name}, {call_reason} are filled in).
    screening_reply: str = Field(
        default="Hi, this is {caller_name}, calling about {call_reason}.", min_length=1
    )
    #: The voicemail message, played once after the beep ({caller_name}, {call_reason}).
    voicemail_message: str = Field(
        default=(
            "Hi, this is {caller_name}, calling about {call_reason}. "
            "Please call us back when you can. Thank you, goodbye."
        ),
        min_length=1,
    )
    #: Where to go in an IVR menu, in words ("billing", "prescription refill");
    #: empty means reach a person.
    ivr_goal: str = ""
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    turn: TurnConfig = Field(default_factory=TurnConfig)
    amd: AmdConfig = Field(default_factory=AmdConfig)
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)
    #: The agent's own tools (``package.module:function``), each declaring its side effects.
    tools: list[ToolSpec] = Field(default_factory=list)
    #: Whether the LLM steers the call with control markers ([END_CALL], [TRANSFER:x], ...).
    control_markers: bool = True
    transfer: TransferConfig = Field(default_factory=TransferConfig)
    guardian: GuardianConfig = Field(default_factory=GuardianConfig)
    tool_gate: ToolGateConfig = Field(default_factory=ToolGateConfig)
    watchdog: WatchdogConfig = Field(default_factory=WatchdogConfig)
    #: The far end's number on simulated calls (replays, chat); a real line reports its own.
    caller_number: str = ""

    @field_validator("caller_number")
    @classmethod
    def _caller_number(cls, value: str) -> str:
        if not value.strip():
            return ""
        try:
            return parse_e164(value)
        except PhoneNumberError as exc:
            raise ValueError(str(exc)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # file values arrive as init kwargs; the environment overrides them
        return (env_settings, init_settings)

    def full_instructions(self) -> str:
        return f"{self.instructions}\nYour task on this call: {self.task}."

    def fill(self, template: str) -> str:
        """``template`` with {caller_name}, {call_reason} and {task} filled in."""
        reason = self.call_reason or self.task
        return (
            template.replace("{caller_name}", self.caller_name)
            .replace("{call_reason}", reason)
            .replace("{task}", self.task)
        )

    def with_variables(self, variables: dict[str, str]) -> AgentConfig:
        """A copy with a contact's variables filled into its texts.

        ``{name}`` in ``instructions``, ``task``, ``opening_instructions``,
        ``call_reason``, ``screening_reply`` and ``voicemail_message`` is replaced
        by the variable ``name``; placeholders with no such variable are left for
        the runtime (``{caller_name}``, ``{task}``).
        """
        if not variables:
            return self

        def fill(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), text)

        fields = (
            "instructions",
            "task",
            "opening_instructions",
            "call_reason",
            "screening_reply",
            "voicemail_message",
        )
        return self.model_copy(update={f: fill(getattr(self, f)) for f in fields})

    def with_overrides(self, overrides: dict[str, Any], *, source: str) -> AgentConfig:
        """A copy with a recorded call's ``agent:`` overrides applied (deep merge)."""
        if not overrides:
            return self
        if "models" in overrides:
            raise ConfigError(
                f"{source}: agent.models: models cannot be overridden per call "
                "(they are built once per run); use --config or CALLRT_MODELS__* instead"
            )
        data = _deep_merge(self.model_dump(), overrides)
        # model_validate skips the settings sources: the environment must not undo a call's override
        return _validate(data, source=source, prefix="agent.", settings=False)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _validate(
    data: dict[str, Any],
    *,
    source: str,
    prefix: str = "",
    settings: bool = True,
    check_origins: tuple[tuple[str, int], ...] = (),
) -> AgentConfig:
    try:
        return AgentConfig(**data) if settings else AgentConfig.model_validate(data)
    except ValidationError as exc:
        from agent.app.config_errors import describe_error  # names the env variable or file:line

        files = [Path(source), DEFAULT_CONFIG] if Path(source).is_file() else [DEFAULT_CONFIG]
        # a file's checks follow the default ones: name the index the file wrote
        renames: dict[tuple[str | int, ...], tuple[tuple[str | int, ...], Path]] = {
            ("guardrails", "checks", i): (
                ("guardrails", "checks", j),
                Path(source) if layer == "file" else DEFAULT_CONFIG,
            )
            for i, (layer, j) in enumerate(check_origins)
        }
        message = describe_error(
            exc,
            data=data,
            model=AgentConfig,
            source=source,
            files=files,
            prefix=prefix,
            environment=settings,
            renames=renames,
        )
        raise ConfigError(message) from None


def load_config(path: str | Path | None = None, *, warn: bool = True) -> AgentConfig:
    """Load an agent config file over the built-in defaults (the defaults alone when None).

    Args:
        path: the agent config YAML; None for ``configs/default.yaml`` alone.
        warn: log :func:`warn_dropped_checks` now. A command that still has to build
            the config's models passes False and warns once they are built, so a
            config that fails prints its error alone.
    """
    config = load_layers(path).config
    if warn:
        warn_dropped_checks(config, source=str(path or DEFAULT_CONFIG))
    return config


def dropped_default_checks(config: AgentConfig) -> list[str]:
    """The names of the default guardrail checks that ``config`` does not run.

    A check the config replaced by name is kept, not dropped.
    """
    default = (_read(DEFAULT_CONFIG).get("guardrails") or {}).get("checks") or []
    kept = {c.name or "_".join(c.decisions) for c in config.guardrails.checks}
    return [name for c in default if (name := check_name(c)) not in kept]


def warn_dropped_checks(config: AgentConfig, *, source: str) -> None:
    """Log a warning when ``config`` (read from ``source``) runs without default checks."""
    dropped = dropped_default_checks(config)
    if dropped:
        logger.warning(
            "agent config %s drops the default guardrail checks %s "
            "(guardrails.inherit: false or checks: [])",
            source,
            ", ".join(dropped),
            extra={"file": source, "dropped": dropped},
        )


@dataclass(frozen=True)
class LoadedConfig:
    """An agent config with its layers: the defaults' data and the file's own data."""

    config: AgentConfig
    source: str
    default: dict[str, Any]
    file: dict[str, Any] | None
    opted_out: bool
    #: a recorded call's ``agent:`` overrides, when the config is a call's
    call: dict[str, Any] | None = None
    #: how the shown file relates to the agent config (a campaign's, a call's)
    note: str = ""

    def sources(self) -> list[tuple[str, str, str]]:
        """Every effective value with its origin (:func:`agent.app.config_layers.value_sources`)."""
        return value_sources(
            self.config.model_dump(mode="json"), self.default, self.file, call=self.call
        )


def load_layers(path: str | Path | None = None) -> LoadedConfig:
    """Load ``path`` over ``configs/default.yaml``, keeping what each layer said."""
    default = _read(DEFAULT_CONFIG)
    _resolve_script(default, DEFAULT_CONFIG.parent)
    p = Path(path) if path is not None else DEFAULT_CONFIG
    if p.resolve() == DEFAULT_CONFIG:
        return LoadedConfig(_validate(default, source=str(p)), str(p), default, None, False)
    file = _read(p)
    _resolve_script(file, p.parent)
    try:
        layered = merge_layers(default, file, source=str(p))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config = _validate(layered.data, source=str(p), check_origins=layered.check_origins)
    return LoadedConfig(config, str(p), default, file, bool(dropped_default_checks(config)))


def load_for_show(path: str | Path | None) -> LoadedConfig:
    """The agent config a shipped file means: an agent config itself, a campaign's agent
    (its ``agent:`` key, else the default), or the default with a recorded call's overrides."""
    if path is None:
        return load_layers(None)
    p = Path(path)
    if p.name.endswith(".call.yaml"):
        from agent.replay.loader import load_paths

        call = load_paths([p])[0]
        base = load_layers(None)
        config = base.config.with_overrides(call.agent, source=str(p))
        note = f"recorded call {p}: the default agent with the call's agent: overrides"
        return dataclasses.replace(base, config=config, call=dict(call.agent), note=note)
    data = _read(p)
    if "windows" in data or "pacing" in data or "caller_id" in data:  # a campaign file
        agent = data.get("agent")
        if agent is not None and not isinstance(agent, str):
            raise ConfigError(f"{p}: agent: expected the path of an agent config YAML file")
        target = (p.parent / agent) if agent else None
        loaded = load_layers(target)
        note = f"campaign {p}: its agent config {target or DEFAULT_CONFIG}"
        return dataclasses.replace(loaded, note=note)
    return load_layers(p)


def _read(p: Path) -> dict[str, Any]:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: file not found (expected an agent config YAML file)") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of config keys at the top level")
    return data


def _resolve_script(data: dict[str, Any], folder: Path) -> None:
    """A relative ``script:`` LLM path is relative to the config file (when it exists there)."""
    models = data.get("models")
    if not isinstance(models, dict):
        return
    spec = models.get("llm")
    if isinstance(spec, str) and spec.startswith("script:"):
        path = Path(spec.removeprefix("script:"))
        if not path.is_absolute() and (folder / path).exists():
            models["llm"] = f"script:{folder / path}"
