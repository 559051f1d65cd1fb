"""``python -m agent``."""

from agent.app.cli.main import main

main()
