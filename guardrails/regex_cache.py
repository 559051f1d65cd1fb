"""Compiled rule-pack regexes kept on disk between processes.

The built-in packs expand to a few hundred kilobytes of regular expressions, and
Python's ``re`` parses and compiles them again in every process: about a second
before the first check, paid by every CLI command and every worker process. The
expensive part (parsing, and turning the tree into the regex engine's code) has a
plain result, a list of integers; this module stores that result per pattern and
hands it straight to the engine next time, the way ``.pyc`` files store bytecode.

The store belongs to one interpreter build: its file name carries the Python
version and the regex engine's ``MAGIC``, and the engine checks every code it is
given (``_sre.compile`` rejects malformed code). Anything unexpected (no cache
folder, an unreadable or foreign file, another interpreter's internals) falls back
to ``re.compile``; the cache only ever saves time.

``CALLRT_CACHE_DIR`` (else ``$XDG_CACHE_HOME/callrt``, else ``~/.cache/callrt``)
holds it, under ``regex/``, as for the replayer's speech cache.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["MAX_ENTRIES", "RegexStore", "default_store_path"]

#: past this many stored patterns, a save keeps only those this process used
MAX_ENTRIES = 2000


def _engine_tag() -> str | None:
    """The interpreter and regex engine the stored code is for (None: unsupported)."""
    try:
        import _sre
    except ImportError:  # pragma: no cover - every CPython has it
        return None
    if sys.implementation.name != "cpython" or not hasattr(_sre, "compile"):
        return None
    version = "-".join(str(v) for v in sys.version_info[:3])
    return f"cpython-{version}-sre{_sre.MAGIC}"


def default_store_path() -> Path | None:
    """The store file for this interpreter, or None when it cannot use one."""
    tag = _engine_tag()
    if tag is None:
        return None
    env = os.environ.get("CALLRT_CACHE_DIR")
    if env:
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "callrt"
    return base / "regex" / f"{tag}.marshal"


def _compile_parts(pattern: str) -> tuple[re.Pattern[str], tuple[Any, ...]]:
    """Compile ``pattern`` as ``re.compile`` does, returning the engine's inputs too."""
    import _sre
    from re import _compiler, _parser  # type: ignore[attr-defined]

    tree = _parser.parse(pattern, 0)
    code = _compiler._code(tree, 0)
    groupindex = dict(tree.state.groupdict)
    indexgroup: list[str | None] = [None] * tree.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    # plain ints: the opcodes are an int subclass, which marshal does not store
    parts = (
        int(tree.state.flags),
        [int(op) for op in code],
        int(tree.state.groups - 1),
        groupindex,
        tuple(indexgroup),
    )
    return _sre.compile(pattern, *parts), parts


class RegexStore:
    """Compiles patterns, reusing the engine code stored by earlier processes.

    Args:
        path: the store file (None: :func:`default_store_path`; a store without a
            usable path compiles normally and saves nothing).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_store_path()
        self._entries: dict[str, tuple[Any, ...]] | None = None
        self._added = 0
        self._used: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def _key(pattern: str) -> str:
        return hashlib.sha256(pattern.encode("utf-8", "surrogatepass")).hexdigest()

    def _load(self) -> dict[str, tuple[Any, ...]]:
        if self._entries is None:
            self._entries = {}
            if self.path is not None and self.path.is_file():
                try:
                    loaded = marshal.loads(self.path.read_bytes())
                    if isinstance(loaded, dict):
                        self._entries = loaded
                except (OSError, ValueError, EOFError, TypeError):
                    logger.debug("regex store unreadable; compiling", exc_info=True)
        return self._entries

    def compile(self, pattern: str) -> re.Pattern[str]:
        """``re.compile(pattern)``, from stored engine code when there is some."""
        if self.path is None:
            return re.compile(pattern)
        with self._lock:
            entries = self._load()
            key = self._key(pattern)
            self._used.add(key)
            stored = entries.get(key)
            if stored is not None:
                try:
                    import _sre

                    compiled: re.Pattern[str] = _sre.compile(pattern, *stored)
                    return compiled
                except Exception:  # malformed or foreign code: compile it afresh
                    logger.debug("stored regex rejected; compiling", exc_info=True)
                    entries.pop(key, None)
            try:
                compiled, parts = _compile_parts(pattern)
            except re.error:
                raise
            except Exception:  # the interpreter's internals differ: no store
                logger.debug("regex internals unavailable; not storing", exc_info=True)
                self.path = None
                return re.compile(pattern)
            entries[key] = parts
            self._added += 1
            return compiled

    def save(self) -> None:
        """Write the patterns compiled since loading (atomically; errors are ignored)."""
        with self._lock:
            if self.path is None or not self._added or self._entries is None:
                return
            try:
                entries = self._entries
                if len(entries) > MAX_ENTRIES:  # patterns of packs edited since: drop them
                    entries = {k: v for k, v in entries.items() if k in self._used}
                self.path.parent.mkdir(parents=True, exist_ok=True)
                data = marshal.dumps(entries)
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".regex-")
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(data)
                    os.replace(tmp, self.path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
                self._added = 0
            except (OSError, ValueError):
                logger.debug("regex store not written", exc_info=True)
