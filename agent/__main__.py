"""``python -m agent``."""

from .cli import main

main()
