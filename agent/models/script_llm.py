"""A scripted LLM (``script:<file.yaml>``): deterministic replies chosen by pattern.

Recorded-call suites that test call policy (markers, transfers, tools, guardian
questions) need the agent to say known things; a small local model does not
follow such instructions reliably. A script is a list of rules; each request is
answered by the first rule whose ``when`` pattern (a Python regex, searched
case-insensitively) matches the request's *new input*: every user and system
message after the agent's last reply (the callee's words, per-turn
instructions, the ``[CALL_OPENING]`` turn). After a tool call, ``after_tool``
rules are tried first, with ``{result}`` standing for the tool's output::

    replies:
      - when: "\\\\[CALL_OPENING\\\\]"
        say: "Hello, this is Sam from Acme. How can I help?"
      - when: "cancel"
        say: "Let me cancel that."
        tool: {name: cancel_appointment, arguments: {appointment_id: "A1"}}
      - when: "goodbye"
        say: "Thanks for calling, goodbye. [END_CALL]"
    after_tool:
      - when: "cancel_appointment"
        say: "{result}"
    default: "Sorry, could you say that again?"

It streams word by word, like a real model, and is a plain ``llm.LLM``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from livekit.agents import llm, utils
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)

__all__ = ["ScriptLLM", "ScriptError", "load_script"]


class ScriptError(ValueError):
    """A reply script is malformed (one line, names the file and the key)."""


@dataclass(frozen=True)
class Rule:
    when: re.Pattern[str]
    say: str
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Script:
    replies: tuple[Rule, ...]
    after_tool: tuple[Rule, ...]
    default: str


def _rules(path: Path, data: Any, key: str) -> tuple[Rule, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ScriptError(f"{path}: {key}: expected a list of rules")
    out = []
    for i, item in enumerate(data):
        where = f"{path}: {key}[{i}]"
        if not isinstance(item, dict) or set(item) - {"when", "say", "tool"}:
            raise ScriptError(f"{where}: expected a mapping with when, say and optionally tool")
        when, say = item.get("when"), item.get("say", "")
        if not isinstance(when, str) or not when:
            raise ScriptError(f"{where}.when: expected a regular expression")
        try:
            pattern = re.compile(when, re.IGNORECASE)
        except re.error as exc:
            raise ScriptError(f"{where}.when: invalid regular expression: {exc}") from None
        if not isinstance(say, str):
            raise ScriptError(f"{where}.say: expected text")
        tool = item.get("tool")
        name: str | None = None
        args: dict[str, Any] = {}
        if tool is not None:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                raise ScriptError(f"{where}.tool: expected {{name: ..., arguments: {{...}}}}")
            name, args = tool["name"], tool.get("arguments") or {}
            if not isinstance(args, dict):
                raise ScriptError(f"{where}.tool.arguments: expected a mapping")
        if not say and name is None:
            raise ScriptError(f"{where}: expected say, tool, or both")
        out.append(Rule(pattern, say, name, args))
    return tuple(out)


def load_script(path: str | Path) -> Script:
    """Read and check a reply script."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ScriptError(f"{p}: file not found (expected a reply script YAML file)") from None
    except yaml.YAMLError as exc:
        raise ScriptError(f"{p}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or set(data) - {"replies", "after_tool", "default"}:
        raise ScriptError(f"{p}: expected the keys replies, after_tool and default")
    default = data.get("default", "Sorry, could you say that again?")
    if not isinstance(default, str):
        raise ScriptError(f"{p}: default: expected text")
    return Script(
        _rules(p, data.get("replies"), "replies"),
        _rules(p, data.get("after_tool"), "after_tool"),
        default,
    )


def new_input(chat_ctx: llm.ChatContext) -> tuple[str, str | None]:
    """The request's new input (text after the agent's last reply) and a tool output, if last."""
    items = list(chat_ctx.items)
    tool_out: str | None = None
    if items and isinstance(items[-1], llm.FunctionCallOutput):
        out = items[-1]
        tool_out = f"{out.name}: {out.output}"
    # the agent's instructions (the first system message) are not new input
    first = items[0] if items else None
    start = 1 if isinstance(first, llm.ChatMessage) and first.role in ("system", "developer") else 0
    texts: list[str] = []
    for item in reversed(items[start:]):
        if isinstance(item, llm.ChatMessage):
            if item.role == "assistant":
                break
            texts.append(item.text_content or "")
    return "\n".join(reversed(texts)), tool_out


class ScriptLLM(llm.LLM):
    """An ``llm.LLM`` that answers from a reply script (see the module docs)."""

    def __init__(self, script: Script, *, source: str = "script") -> None:
        super().__init__()
        self.script = script
        self._source = source

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptLLM:
        return cls(load_script(path), source=str(path))

    @property
    def model(self) -> str:
        return f"script:{self._source}"

    @property
    def provider(self) -> str:
        return "script"

    def choose(self, chat_ctx: llm.ChatContext) -> Rule | None:
        text, tool_out = new_input(chat_ctx)
        if tool_out is not None:
            for rule in self.script.after_tool:
                if rule.when.search(tool_out):
                    result = tool_out.split(": ", 1)[1]
                    return Rule(rule.when, rule.say.replace("{result}", result))
            return None
        return next((r for r in self.script.replies if r.when.search(text)), None)

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        return _ScriptStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _ScriptStream(llm.LLMStream):
    async def _run(self) -> None:
        owner = self._llm
        assert isinstance(owner, ScriptLLM)
        rule = owner.choose(self._chat_ctx)
        text = rule.say if rule is not None else owner.script.default
        request_id = utils.shortuuid("script_")
        for i, word in enumerate(text.split(" ") if text else []):
            piece = word if i == 0 else " " + word
            self._event_ch.send_nowait(
                llm.ChatChunk(id=request_id, delta=llm.ChoiceDelta(role="assistant", content=piece))
            )
        if rule is not None and rule.tool is not None:
            call = llm.FunctionToolCall(
                name=rule.tool, arguments=json.dumps(rule.arguments), call_id=f"{request_id}_tool"
            )
            self._event_ch.send_nowait(
                llm.ChatChunk(
                    id=request_id, delta=llm.ChoiceDelta(role="assistant", tool_calls=[call])
                )
            )
