"""What every command shares: its options typed once (--config, --store-url, --lang, --format),
the settings it runs with, bad input as one line on stderr and exit code 2, and the consoles.

It exists so that each command family parses and reports the same way without copying it.
It must never import at its top more than typer, the names the options are typed with and
the error and text helpers: every command module imports it, so whatever it loads,
`gpubot diagnose --format json` loads too
(tests/e2e/test_cli.py::test_diagnose_as_json_loads_only_what_it_uses)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from functools import cache, wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer

from bot.errors import GpubotError, InputError
from bot.model import Lang
from bot.texts import say

if TYPE_CHECKING:
    from rich.console import Console

    from bot.config import Settings

P = ParamSpec("P")
R = TypeVar("R")


@cache
def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def terminal() -> Console:
    from rich.console import Console

    return Console()


class Format(StrEnum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


def _fail(message: str) -> typer.Exit:
    stderr().print(f"error: {message}", markup=False)
    return typer.Exit(2)


def handles_bad_input(command: Callable[P, R]) -> Callable[P, R]:
    """A person's mistake (a missing file, an unknown id, a setting out of range) is told
    in one line and exit code 2, never as a trace: a trace reads as gpubot's own fault."""

    @wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except GpubotError as exc:
            raise _fail(str(exc)) from None

    return wrapper


ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="YAML settings file. Default: $GPUBOT_CONFIG, else ~/.config/gpubot/settings.yaml "
        "if it exists (`gpubot init` writes it), else the embedded defaults. GPUBOT_* "
        "environment variables override it.",
    ),
]
StoreUrlOption = Annotated[
    str | None,
    typer.Option(
        "--store-url",
        metavar="URL",
        help="The store `gpubot serve` uses (sqlite:///FILE or postgresql://...); default: "
        "store_url in the settings.",
    ),
]
LangOption = Annotated[Lang | None, typer.Option("--lang", help="Language of the texts.")]


def read_settings(config: Path | None) -> Settings:
    """The settings a command runs with; a value they reject is bad input naming the file
    (or the environment) and the field, not pydantic's report of every error."""
    from pydantic import ValidationError

    from bot.config import load_settings, settings_file

    chosen = settings_file(config)
    try:
        return load_settings(chosen)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(str(chosen or "GPUBOT_* environment"), f"{field}: {first['msg']}") from exc


def settings_said(config: Path | None, lang: Lang) -> str:
    """Which settings a command ran with, for a message that depends on them."""
    from bot.config import settings_file

    chosen = settings_file(config)
    if chosen is None:
        return say(lang, "cli.settings.defaults")
    return say(lang, "cli.settings.file", path=chosen)


def report_errors(errors: list[GpubotError]) -> None:
    for error in errors:
        stderr().print(f"error: {error}", markup=False)
