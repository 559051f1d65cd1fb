"""Import first in every bench script: run as a script, a file's folder comes first
on ``sys.path``, and ``bench/amd.py`` / ``bench/guardrails.py`` would shadow the
``amd`` and ``guardrails`` packages. This puts the project root first and drops
the bench folder from the path."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
