"""Sentence embeddings for the learned packs: WordLlama's static 256-dimension model.

WordLlama (MIT, the ``wordllama`` package) ships this model inside its wheel: a
token embedding table trained for sentence similarity, and its tokenizer. A text's
embedding is the mean of its tokens' vectors, scaled to unit length, as WordLlama
computes it; one sentence takes well under a millisecond on one core (numpy). It
carries what words mean, not how they are spelt, which is what a classifier needs on
text from a source it never saw (docs/guardrails.md, "Sixth round").

Only the package's two model files are used, read by path; the package itself is not
imported. Its ``WordLlama.load()`` looks for the tokenizer in a folder the wheel does
not have and would then download it, and importing it costs 0.16 s of start-up for
code this module does not need. Nothing here reaches the network, and a missing file
is an error that names it.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DIM", "MAX_CHARS", "SentenceEncoder", "load_encoder"]

#: Dimensions of an embedding.
DIM = 256
#: Characters of a text that are embedded (long texts are cut).
MAX_CHARS = 600

_TOKENIZER = Path("tokenizers") / "l2_supercat_tokenizer_config.json"
_TABLE = Path("weights") / "l2_supercat_256.safetensors"


class SentenceEncoder:
    """Embeds texts with a token table and its tokenizer.

    Args:
        table: One vector per token id.
        tokenizer: The table's tokenizer (``tokenizers.Tokenizer``).
    """

    def __init__(self, table: npt.NDArray[np.float32], tokenizer: Any) -> None:
        self._table = table
        self._tokenizer = tokenizer

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit-length embeddings, one row per text (a text without tokens embeds as zeros)."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        encoded = self._tokenizer.encode_batch(
            [t[:MAX_CHARS] for t in texts], add_special_tokens=False
        )
        for i, enc in enumerate(encoded):
            ids = np.asarray(enc.ids, dtype=np.int64)
            if ids.size == 0:
                continue
            v = self._table[ids].sum(axis=0, dtype=np.float32) / np.float32(ids.size)
            norm = float(np.linalg.norm(v))
            if norm > 0.0:
                out[i] = v / norm
        return out


@functools.cache
def load_encoder() -> SentenceEncoder:
    """The encoder, loaded once per process from the installed ``wordllama`` package's files.

    Raises:
        RuntimeError: The package or one of its model files is missing.
    """
    try:
        from safetensors import safe_open  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415
    except ImportError as exc:
        raise RuntimeError(
            f"the learned guardrail packs need the wordllama package: {exc}"
        ) from exc
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the learned guardrail packs need the wordllama package: it is not installed"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    for part in (_TOKENIZER, _TABLE):
        if not (root / part).is_file():
            raise RuntimeError(f"{root / part}: expected WordLlama's model file in its package")
    tokenizer = Tokenizer.from_file(str(root / _TOKENIZER))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    with safe_open(str(root / _TABLE), framework="np") as f:
        table = f.get_tensor("embedding.weight")
    if table.ndim != 2 or table.shape[1] != DIM:
        raise RuntimeError(f"{root / _TABLE}: expected {DIM} dimensions, got {table.shape}")
    return SentenceEncoder(np.ascontiguousarray(table, dtype=np.float32), tokenizer)
