"""How every ``python -m agent`` command presents itself: help, usage lines, errors.

:class:`CallrtTyper` is a ``typer.Typer`` whose commands take ``-h`` as well as
``--help``, print usage lines with argument names (``replay [OPTIONS] PATHS...``
instead of Typer's ``{paths}...``), leave the ``<bool>`` type off flags, and
report a missing or bad argument in the same one line as every other input
error (``error: --url: ...``, exit 2) instead of Click's box.
"""

from __future__ import annotations

from typing import Any

import typer

# Typer 0.29 carries its own copy of Click and raises that copy's exceptions; it has
# no public name for them
from typer._click import exceptions as click
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = ["HELP_OPTIONS", "CallrtTyper", "click", "one_line_usage_error"]

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


def one_line_usage_error(exc: click.UsageError) -> str:
    """A Click usage error as one line naming the option or argument."""
    message = exc.format_message()
    param = getattr(exc, "param", None)
    if param is not None and isinstance(exc, click.BadParameter):
        names = [n for n in getattr(param, "opts", []) if n.startswith("--")] or [
            (param.metavar or param.name or "").upper()
        ]
        if names[0].lower() not in message.lower():
            message = f"{names[0]}: {message}"
    command = exc.ctx.command_path if exc.ctx is not None else ""
    return f"{message} (see `{command} -h`)" if command else message


def _quiet_flags(params: list[Any]) -> None:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # Typer would show "<bool>" in the help


def _quiet_help(option: Any) -> Any:
    if option is not None:
        _quiet_flags([option])
    return option


class CallrtCommand(TyperCommand):
    """A Typer command with plain usage lines and flags without a type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _quiet_flags(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        return _quiet_help(super().get_help_option(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = (param.metavar or param.name or "").upper()
                name = name if param.required else f"[{name}]"
                pieces.append(name + ("..." if param.nargs != 1 else ""))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


class CallrtGroup(TyperGroup):
    """A Typer group whose own flags show no type either."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _quiet_flags(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        return _quiet_help(super().get_help_option(ctx))


class CallrtTyper(typer.Typer):
    """``typer.Typer`` with ``-h`` and :class:`CallrtCommand` for every command."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", HELP_OPTIONS)
        kwargs.setdefault("cls", CallrtGroup)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", CallrtCommand)
        return super().command(*args, **kwargs)
