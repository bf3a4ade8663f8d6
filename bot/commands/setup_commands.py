"""`gpubot init` and `gpubot db upgrade`: setting gpubot up, before and between versions of
`gpubot serve` (the settings file to start from, the store's schema).

They parse their options, call their composition roots (`bot.roots.first_settings`,
`bot.roots.store_commands`) and print. This module must never write a file or open a
database itself, nor import at its top more than the other commands need
(bot/commands/shared.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.commands.shared import (
    ConfigOption,
    LangOption,
    StoreUrlOption,
    handles_bad_input,
    read_settings,
)
from bot.model import Lang
from bot.texts import say


@handles_bad_input
def init_command(
    approver: Annotated[
        list[str] | None,
        typer.Option(
            "--approver",
            metavar="USER",
            help="Who may approve cordon, drain and uncordon (repeatable); default: your login "
            "name. In Slack, a user id (U0123...).",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="Where to write the settings. Default: $GPUBOT_CONFIG, else "
            "~/.config/gpubot/settings.yaml (where every command looks).",
        ),
    ] = None,
    store_url: Annotated[
        str | None,
        typer.Option(
            "--store-url",
            metavar="URL",
            help="The store to name; default: gpubot.db beside the settings file.",
        ),
    ] = None,
    lang: LangOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a settings file that exists.")
    ] = False,
) -> None:
    """Write a commented settings file to start from: who approves, the store, the webhook's
    token (a new random one in a file beside it), console or Slack."""
    from bot.roots.first_settings import write_first_settings

    language = lang or Lang.EN
    written = write_first_settings(
        config,
        approver,
        store_url,
        language,
        force=force,
        on_new_token=lambda path: print(say(language, "cli.init.token", path=path)),
    )
    people = ", ".join(written.approvers)
    print(
        say(
            language,
            "cli.init.wrote",
            path=written.target,
            approvers=people,
            store=written.store_url,
        )
    )
    if not written.found_without_config:
        print(say(language, "cli.init.read_with", path=written.target))
    print(say(language, "cli.init.next"))


@handles_bad_input
def db_upgrade(
    store_url: StoreUrlOption = None,
    config: ConfigOption = None,
) -> None:
    """Migrate the store to this gpubot's schema (back the database up first)."""
    from bot.roots.store_commands import upgrade_schema

    before, after = upgrade_schema(store_url or read_settings(config).store_url)
    print(f"schema {before or 'none'} -> {after}")
