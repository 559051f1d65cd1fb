"""``python -m agent chat``: a terminal conversation with an agent over the text channel.

Typed lines are the caller's turns; the agent's turns are printed as ``agent: ...``.
Lines starting with ``/`` are commands: ``/help`` lists them, ``/answer ID TEXT``
answers a guardian question, ``/dtmf DIGITS`` presses keys, ``/quit`` leaves. Call
events (verified, guardian questions, transfer, end) go to stderr in brackets. The
conversation ends when stdin ends, on ``/quit``, or when the agent ends or transfers
the call.

Start-up takes seconds (local weights, rule packs, then the LLM's first reply), so
stderr says at once which agent and models are starting, then when the models are
loaded and the agent is preparing its opening; stdout carries only the agent's turns.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, TextIO

from agent.app.call import ModelSet
from agent.app.chat import ChatSession, text_models
from agent.app.config import AgentConfig
from agent.core import clock
from agent.trust.desk import GuardianDesk, PendingQuestion

__all__ = ["HELP", "banner", "run_chat"]

#: what ``/help`` prints (also on stderr, one line each)
HELP = (
    "/help             this list",
    "/answer ID TEXT   answer a guardian question (its ID is printed when the agent asks)",
    "/dtmf DIGITS      press keypad keys (0-9, * and #)",
    "/quit             leave the chat (Ctrl-D too)",
    "any other line is said to the agent",
)


def _model_names(config: AgentConfig) -> str:
    g = config.guardrails
    guarded = bool(g.checks or g.setup or g.response)
    guardrails = g.model + (f" (fallback {g.fallback})" if g.fallback else "") if guarded else "off"
    return f"llm {config.models.llm}, guardrails {guardrails}"


def banner(config: AgentConfig, source: str) -> str:
    """The line printed before anything loads: which agent, which models, how to get help.

    Args:
        config: the agent config.
        source: where it came from (the ``--agent`` file, or the built-in default).
    """
    return (
        f"callrt chat: agent {config.name!r} ({source}); {_model_names(config)}. "
        "Type a line to talk, /help for commands, /quit to leave."
    )


async def _load_models(config: AgentConfig, models: ModelSet) -> None:
    """Load what the call would otherwise load on first use, before the call starts.

    The LLM's weights (when local) and the guardrails' decision models and rule packs
    are cached, so the call reuses them; an error here is the error the call would
    have raised.
    """
    from agent.models.registry import prewarm

    await prewarm(models.llm)
    factory = models.guardrails
    g = config.guardrails
    if factory is None:
        return

    def build() -> None:
        if g.checks or g.setup:
            factory.decision_model(g)
        factory.response(g)

    await asyncio.get_running_loop().run_in_executor(None, build)


def _reader(
    stream: TextIO, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]
) -> None:
    # a daemon thread: a blocked readline never keeps the process alive after the call ends
    def run() -> None:
        for line in stream:
            loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\n"))
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=run, name="chat-stdin", daemon=True).start()


def _say(stream: TextIO, text: str) -> None:
    stream.write(text + "\n")
    stream.flush()


def run_chat(
    config: AgentConfig,
    *,
    source: str = "built-in configs/default.yaml",
    caller_number: str | None,
    channel: str = "chat",
    guardian_port: int | None = None,
    guardian_token: str | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run one conversation; returns the exit status (0).

    Args:
        config: the agent config.
        source: where the config came from (shown in the banner).
        caller_number: who is typing, E.164 (guardian verification).
        channel: ``chat``, or ``voice`` for a phone caller's turn policy.
        guardian_port: also serve guardian questions over HTTP on this port.
        guardian_token: the bearer token that endpoint requires.
        stdin: typed lines (default: the terminal).
        out: the agent's turns (default: stdout).
        err: the banner, progress and call events (default: stderr).
    """
    err = err or sys.stderr
    _say(err, banner(config, source))
    models = text_models(config)
    return clock.run(
        _chat(
            config,
            models,
            caller_number=caller_number,
            channel=channel,
            guardian_port=guardian_port,
            guardian_token=guardian_token,
            stdin=stdin or sys.stdin,
            out=out or sys.stdout,
            err=err,
        ),
        virtual=False,
    )


async def _chat(
    config: AgentConfig,
    models: ModelSet,
    *,
    caller_number: str | None,
    channel: str,
    guardian_port: int | None,
    guardian_token: str | None,
    stdin: TextIO,
    out: TextIO,
    err: TextIO,
) -> int:
    say = _say
    loop = asyncio.get_running_loop()
    started = loop.time()
    say(err, f"[loading models: {_model_names(config)} ...]")
    await _load_models(config, models)
    took = loop.time() - started
    say(err, f"[models loaded in {took:.1f} s; the agent is preparing its opening]")

    desk = GuardianDesk()
    server = None
    if guardian_port is not None:
        from agent.trust.guardian_http import GuardianServer

        server = GuardianServer(desk, token=guardian_token)
        port = await server.start(port=guardian_port)
        say(err, f"[guardian endpoint: http://127.0.0.1:{port}]")

    def on_desk(event: str, q: PendingQuestion) -> None:
        if event == "asked":
            say(err, f"[guardian question {q.id}: {q.question}]  answer with: /answer {q.id} TEXT")

    unsubscribe = desk.subscribe(on_desk)

    def on_event(msg: Any) -> None:
        match msg.kind:
            case "agent_turn_completed" if msg.text:
                say(out, f"agent: {msg.text}")
            case "caller_verified":
                say(err, f"[caller verified by {msg.method}]")
            case "call_transferred":
                say(err, f"[transferred to {msg.target}]")
            case "tool_call_reviewed" if msg.decision != "allow":
                say(err, f"[tool {msg.tool}: {msg.decision} ({msg.reason})]")
            case "call_ended":
                say(err, f"[call ended: {msg.disposition}, {msg.reason}]")

    session = ChatSession(
        config,
        models,
        desk=desk,
        channel="voice" if channel == "voice" else "chat",
        caller_number=caller_number,
        on_event=on_event,
    )
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    _reader(stdin, asyncio.get_running_loop(), lines)
    try:
        await session.start()
        ended = asyncio.ensure_future(session.wait_ended())
        while not ended.done():
            nxt = asyncio.ensure_future(lines.get())
            await asyncio.wait({nxt, ended}, return_when=asyncio.FIRST_COMPLETED)
            if not nxt.done():
                nxt.cancel()
                break
            line = nxt.result()
            if line is None or line.strip() == "/quit":
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                _command(text, session, desk, lambda s: say(err, s))
                continue
            await session.send(text)
        if not ended.done():
            await session.close()
        else:
            await session.line.aclose()
        await asyncio.gather(ended, return_exceptions=True)
    finally:
        unsubscribe()
        if server is not None:
            await server.aclose()
    return 0


def _command(text: str, session: ChatSession, desk: GuardianDesk, note: Any) -> None:
    name, _, rest = text.partition(" ")
    if name == "/help":
        for line in HELP:
            note(line)
    elif name == "/answer":
        qid, _, answer = rest.strip().partition(" ")
        try:
            desk.answer(qid, answer)
        except (LookupError, ValueError) as exc:
            note(f"[{exc}]")
    elif name == "/dtmf" and rest.strip():
        keys = "".join(c for c in rest if c in "0123456789*#")
        if keys:
            session.press(keys)
        else:
            note("[/dtmf: expected keys 0-9, * or #]")
    else:
        note(f"[unknown command {name!r}; /help lists the commands]")
