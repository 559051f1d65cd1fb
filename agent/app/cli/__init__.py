"""The command line, ``python -m agent`` (``main``), one module per command group.

- :mod:`~agent.app.cli.main`: the Typer app and the small commands.
- :mod:`~agent.app.cli.replay`, :mod:`~agent.app.cli.campaign`,
  :mod:`~agent.app.cli.chat`, :mod:`~agent.app.cli.decide`: the larger commands.
- :mod:`~agent.app.cli.style`: shared terminal styling.
"""
