"""Sentence embeddings for the learned packs: WordLlama's static 256-dimension model.

WordLlama (MIT, the ``wordllama`` package) ships this model inside its wheel: a token
embedding table trained for sentence similarity, and its tokenizer. A text's
embedding is the mean of its tokens' vectors, scaled to unit length; one sentence
takes well under a millisecond on one core (numpy). It carries what words mean, not
how they are spelt, which is what a classifier needs on text from a source it never
saw (docs/guardrails.md, "Sixth round").

The files are read from the installed package here. ``WordLlama.load()`` looks for
the tokenizer in a folder the wheel does not have and would then download it; this
module never reaches the network, and a missing file is an error that names it.
"""

from __future__ import annotations

import functools
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
        model: WordLlama's inference object (table and tokenizer).
    """

    def __init__(self, model: Any) -> None:
        self._model = model

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit-length embeddings, one row per text (an empty text embeds as zeros)."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        # an empty text has no tokens to average (and would be divided by zero)
        kept = [i for i, t in enumerate(texts) if t[:MAX_CHARS].strip()]
        if kept:
            vectors = self._model.embed([texts[i][:MAX_CHARS] for i in kept], norm=True)
            out[kept] = np.asarray(vectors, dtype=np.float32)
        return out


@functools.cache
def load_encoder() -> SentenceEncoder:
    """The encoder, loaded once per process from the installed ``wordllama`` package.

    Raises:
        RuntimeError: The package or one of its model files is missing.
    """
    try:
        import wordllama  # noqa: PLC0415
        from safetensors import safe_open  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415
        from wordllama.inference import WordLlamaInference  # noqa: PLC0415
    except ImportError as exc:
        raise RuntimeError(
            f"the learned guardrail packs need the wordllama package: {exc}"
        ) from exc
    root = Path(wordllama.__file__).parent
    for part in (_TOKENIZER, _TABLE):
        if not (root / part).is_file():
            raise RuntimeError(f"{root / part}: expected WordLlama's model file in its package")
    tokenizer = Tokenizer.from_file(str(root / _TOKENIZER))
    with safe_open(str(root / _TABLE), framework="np") as f:
        table = f.get_tensor("embedding.weight")
    if table.shape[1] != DIM:
        raise RuntimeError(f"{root / _TABLE}: expected {DIM} dimensions, got {table.shape[1]}")
    return SentenceEncoder(WordLlamaInference(table, tokenizer))
