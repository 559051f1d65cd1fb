"""Loads a bench script as a module, as running it would (for tests of its functions)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_bench_script(filename: str, module_name: str) -> ModuleType:
    """``bench/<filename>`` imported as ``module_name``, with its folder first on the
    path while it loads (bench/_syspath.py takes it off, as when it runs)."""
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "bench" / filename)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved
