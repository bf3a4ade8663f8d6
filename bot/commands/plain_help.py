"""Help as click writes it, for every command: typer's own reads as text to type.

Typer writes an argument as `{REQUEST_ID}` and `REQUEST_ID <str>`, an option's value as
`--wait <float range>`: braces and Python types a person would copy into the command line.
This module only changes how help is written; it must never change what a command accepts."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    # typer carries its own click: these are the types its commands are called with.
    from typer._click import Context, HelpFormatter, Parameter


class PlainArguments(typer.core.TyperCommand):
    """Arguments in help as click writes them: `REQUEST_ID` or `[PATH]` in the usage line,
    the metavar alone in the list. Typer writes `{REQUEST_ID}` and `REQUEST_ID <str>`, which
    read as text to type with its braces."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, typer.core.TyperArgument):
                name = _metavar(param)
                name = name if param.required else f"[{name}]"
                pieces.append(name + ("..." if param.nargs != 1 else ""))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, typer.core.TyperArgument):
                arguments.append((_metavar(param), record[1]))
            else:
                options.append((_plain_placeholder(param, record[0]), record[1]))
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _metavar(argument: typer.core.TyperArgument) -> str:
    return argument.metavar or (argument.name or "").upper()


def _plain_placeholder(option: Parameter, written: str) -> str:
    """`--wait <float range>` as `--wait WAIT`, `--lang <zh|en>` as `--lang [zh|en]`: typer
    puts the value's Python type in angle brackets, which reads as text to type."""

    def plain(found: re.Match[str]) -> str:
        inside = found.group(1)
        return f" [{inside}]" if "|" in inside else f" {(option.name or 'value').upper()}"

    return re.sub(r" <([^<>]*)>", plain, written)
