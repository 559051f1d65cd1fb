"""``python -m agent chat`` and ``python -m agent guardian`` as a user runs them.

Each test starts the real command in a subprocess. The agent in
``tests/data/chat/agent.yaml`` answers from a reply script (no model to load),
so these tests stop well within their timeouts; only the test marked
``integration`` runs the default config's local LLM. Typed lines go to stdin;
the agent's turns come back on stdout as ``agent: TEXT`` and call events on
stderr in brackets. Bad input exits 2 with one line naming the problem.
"""

from __future__ import annotations

import io
import json
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from agent.app.cli.chat import run_chat as run_chat_in_process
from agent.app.config import load_config
from tests.integration import test_cli as cli
from tests.integration.test_cli import one_line

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data" / "chat"
AGENT = DATA / "agent.yaml"
OPENING = "agent: Hello, this is Sam from Acme Dental. How can I help?"
HOURS = "agent: We're open nine to five, Monday to Friday."
# Generous bounds for work that takes a few seconds; a test only fails on them when
# the command hangs, never because a machine is slow.
TIMEOUT = 100.0


def run_cli(*args: str | Path, stdin: str = "", timeout: float = TIMEOUT) -> Any:
    return cli.run_cli(*args, stdin=stdin, timeout=timeout)


class Chat:
    """A running ``python -m agent chat``: type lines, wait for what it prints."""

    def __init__(self, *args: str | Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "chat", *map(str, args)],
            cwd=ROOT,
            env=cli.cli_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            assert stream is not None
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name: str, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put((name, line.rstrip("\n")))
        self.lines.put((name, None))

    def type(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines))
        self.proc.stdin.flush()

    def expect(self, stream: str, pattern: str, timeout: float = TIMEOUT) -> re.Match[str]:
        """Read lines until one on ``stream`` matches ``pattern`` (a regex)."""
        seen = self.out if stream == "out" else self.err
        for line in seen:
            if m := re.search(pattern, line):
                return m
        while True:
            try:
                name, got = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no {stream} line matching {pattern!r} within {timeout} s\n"
                    f"stdout: {self.out}\nstderr: {self.err}"
                ) from None
            if got is None:
                if name == stream:
                    raise AssertionError(
                        f"{stream} ended without a line matching {pattern!r}\n"
                        f"stdout: {self.out}\nstderr: {self.err}"
                    )
                continue
            (self.out if name == "out" else self.err).append(got)
            if name == stream and (m := re.search(pattern, got)):
                return m

    def end_input(self) -> None:
        """Close stdin, as Ctrl-D does in a terminal."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def finish(self, timeout: float = TIMEOUT) -> int:
        """Wait for the process to exit by itself; collect the rest of its output."""
        code = self.proc.wait(timeout=timeout)
        ended: set[str] = set()
        while len(ended) < 2:
            name, line = self.lines.get(timeout=timeout)
            if line is None:
                ended.add(name)
            else:
                (self.out if name == "out" else self.err).append(line)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def chats() -> Iterator[list[Chat]]:
    started: list[Chat] = []
    yield started
    for chat in started:
        chat.close()


def start(chats: list[Chat], *args: str | Path) -> Chat:
    chat = Chat(*args)
    chats.append(chat)
    return chat


# -- a conversation -----------------------------------------------------------------------


def test_chat_prints_the_opening_and_each_reply_and_exits_0() -> None:
    r = run_cli("chat", "--agent", AGENT, stdin="Hi\nWhat are your hours?\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [OPENING, "agent: Sorry, could you say that again?", HOURS]
    assert "[call ended: completed, callee hung up]" in r.stderr


def test_end_call_ends_the_chat_by_itself_while_stdin_stays_open(chats: list[Chat]) -> None:
    chat = start(chats, "--agent", AGENT)
    chat.type("What are your hours?", "That's all, goodbye.")
    assert chat.finish() == 0  # stdin is still open: the agent ended the chat
    assert chat.out == [OPENING, HOURS, "agent: Thanks for calling, goodbye."]
    assert not any("[END_CALL]" in line or "anything else" in line for line in chat.out)
    assert "[call ended: completed, agent ended the call]" in chat.err


def test_lines_typed_after_the_agent_ended_the_chat_do_not_keep_it_running() -> None:
    r = run_cli(
        "chat",
        "--agent",
        AGENT,
        # the person keeps typing after the goodbye: the first of these lines is read
        # while the call is still ending, the next ones once it has ended
        stdin="That's all, goodbye.\nHello?\nAre you still there?\nHello?\n",
        timeout=60,
    )
    assert r.returncode == 0
    assert "[call ended: completed, agent ended the call]" in r.stderr


# -- start-up and /help -------------------------------------------------------------------


class Terminal:
    """stdout and stderr as one terminal shows them: every line in the order written."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def stream(self, name: str) -> Any:
        terminal = self

        class Stream(io.StringIO):
            def write(self, text: str) -> int:
                terminal.lines.extend((name, line) for line in text.splitlines())
                return len(text)

        return Stream()


def test_start_up_says_at_once_what_is_starting_then_that_the_models_loaded() -> None:
    shown = Terminal()
    code = run_chat_in_process(
        load_config(AGENT),
        source="tests/data/chat/agent.yaml",
        caller_number=None,
        stdin=io.StringIO("What are your hours?\n"),
        out=shown.stream("out"),
        err=shown.stream("err"),
    )
    assert code == 0
    (banner, loading, loaded, opening, *_) = shown.lines
    assert banner[0] == "err"
    assert banner[1].startswith("callrt chat: agent 'chat-cli-tests' (tests/data/chat/agent.yaml)")
    models = f"llm script:{DATA / 'replies.yaml'}, guardrails learned"  # paths are resolved
    assert models in banner[1]
    assert "/help" in banner[1]
    assert loading == ("err", f"[loading models: {models} ...]")
    assert re.fullmatch(
        r"\[models loaded in \d+\.\d s; the agent is preparing its opening\]", loaded[1]
    )
    assert opening == ("out", OPENING)
    assert ("out", HOURS) in shown.lines


def test_help_lists_the_commands_and_an_unknown_command_points_to_it() -> None:
    r = run_cli("chat", "--agent", AGENT, stdin="/help\n/hepl\nWhat are your hours?\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [OPENING, HOURS]  # commands are not said to the agent
    err = r.stderr.splitlines()
    assert err[0].startswith("callrt chat: agent 'chat-cli-tests'")
    for command in ("/help", "/answer ID TEXT", "/dtmf DIGITS", "/quit"):
        assert any(line.startswith(command) for line in err), command
    assert "[unknown command '/hepl'; /help lists the commands]" in err


# -- the guardian over HTTP ---------------------------------------------------------------


def test_a_guardian_question_is_listed_and_answered_over_http(chats: list[Chat]) -> None:
    chat = start(chats, "--agent", AGENT, "--guardian-port", "0")
    endpoint = chat.expect("err", r"^\[guardian endpoint: (http://127\.0\.0\.1:\d+)\]")
    url = endpoint.group(1)
    chat.expect("out", re.escape(OPENING))
    chat.type("Could I get a refund for last month?")
    asked = chat.expect("err", r"^\[guardian question (q_\w+): (.*)\]  answer with: /answer")
    qid, question = asked.group(1), asked.group(2)
    assert question == "May we refund last month's cleaning?"
    chat.expect("out", r"^agent: One moment please")

    listed = run_cli("guardian", "list", "--url", url)
    assert listed.returncode == 0, listed.stderr
    pending = json.loads(listed.stdout)
    assert [(q["id"], q["question"], q["status"]) for q in pending] == [(qid, question, "pending")]

    answered = run_cli("guardian", "answer", qid, "yes", "--url", url)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["status"] == "answered"
    chat.expect("out", r"^agent: Good news: the refund is approved\.$")

    again = run_cli("guardian", "answer", qid, "yes", "--url", url)
    assert again.returncode == 2
    assert "already answered" in one_line(again.stderr)
    assert json.loads(run_cli("guardian", "list", "--url", url).stdout) == []

    chat.end_input()
    assert chat.finish() == 0
    assert chat.out == [
        OPENING,
        "agent: Let me check that with the account holder.",
        "agent: One moment please, I'm checking on that for you.",
        "agent: Good news: the refund is approved.",
    ]


def test_the_printed_guardian_endpoint_works_as_the_url_to_list_questions(
    chats: list[Chat],
) -> None:
    chat = start(chats, "--agent", AGENT, "--guardian-port", "0")
    printed = chat.expect("err", r"^\[guardian endpoint: (\S+)\]").group(1)
    listed = run_cli("guardian", "list", "--url", printed)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["chat", "--caller", "555-1234"], ["--caller", "'555-1234'", "E.164"]),
        (["chat", "--agent", "missing.yaml"], ["missing.yaml", "not found"]),
        (["chat", "--guardian-port", "70000"], ["--guardian-port", "70000"]),
        (["guardian", "answer", "q_x", "", "--url", "http://127.0.0.1:9"], ["ANSWER", "empty"]),
        (["guardian", "list", "--url", "http://127.0.0.1:9"], ["127.0.0.1:9", "cannot connect"]),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_problem(
    args: list[str], needles: list[str]
) -> None:
    r = run_cli(*args)
    assert r.returncode == 2, r.stderr
    line = one_line(r.stderr)
    assert line.startswith("error: ")
    for needle in needles:
        assert needle in line
    assert r.stdout == ""


def test_a_tool_that_cannot_be_imported_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text('tools: [{function: "nope.missing:fn"}]\n', encoding="utf-8")
    r = run_cli("chat", "--agent", config, stdin="Hi\n")
    assert r.returncode == 2, r.stderr
    line = one_line(r.stderr)
    assert str(config) in line
    assert "tools[0].function" in line
    assert "nope.missing" in line
    assert r.stdout == ""


# -- the default agent --------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.timeout(400)
def test_chat_with_the_default_local_model_answers_each_line() -> None:
    r = run_cli("chat", stdin="Hi there\nWhat time is my appointment?\n", timeout=360)
    assert r.returncode == 0, r.stderr
    agent_lines = [line for line in r.stdout.splitlines() if line.startswith("agent: ")]
    assert len(agent_lines) >= 2
    assert all(len(line) > len("agent: ") for line in agent_lines)
    assert "[call ended: completed, callee hung up]" in r.stderr
    assert "[loading models: llm local/smollm2-135m, guardrails learned ...]" in r.stderr
