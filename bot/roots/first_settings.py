"""The composition root of `gpubot init`: the first settings file, rendered from the
template, with a fresh webhook token in a file beside it, and read back as every command
will read it.

It exists so that the command only picks its defaults and prints. It must never replace a
settings file it was not told to (`force`), never overwrite a token file (whoever posts
alerts already holds that token), and never leave a settings file the loader rejects
without saying so."""

from __future__ import annotations

import getpass
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot import settings_template
from bot.config import CONFIG_ENV, default_settings_file, load_settings
from bot.errors import InputError
from bot.model import Lang
from bot.store.database import parse_store_url


@dataclass(frozen=True)
class FirstSettings:
    """What `init` wrote, for the command to tell."""

    target: Path
    approvers: list[str]
    store_url: str
    found_without_config: bool
    """Whether every command finds it without `--config`: it is where they look by default,
    or $GPUBOT_CONFIG names it."""


def write_first_settings(
    config: Path | None,
    approvers: list[str] | None,
    store_url: str | None,
    language: Lang,
    *,
    force: bool,
    on_new_token: Callable[[Path], None],
) -> FirstSettings:
    """`on_new_token` is told the token file as soon as it exists, before the settings are
    written: if writing them fails, the person still learns that a token was made."""
    target = config or (Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None)
    target = (target or default_settings_file()).expanduser().absolute()
    if target.exists() and not force:
        raise InputError(str(target), "exists; --force replaces it")
    people = approvers or [getpass.getuser()]
    url = store_url or f"sqlite:///{target.parent / 'gpubot.db'}"
    parse_store_url(url)
    token_file = target.parent / "webhook-token"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not token_file.exists():
            # Only its owner reads it: it is what lets anyone post alerts to the webhook.
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(32) + "\n")
            on_new_token(token_file)
        target.write_text(
            settings_template.render(people, url, token_file, language), encoding="utf-8"
        )
    except OSError as exc:
        raise InputError(str(target), exc.strerror or str(exc)) from exc
    load_settings(target)  # what was written must be what every command can read
    found = target == default_settings_file().absolute() or bool(os.environ.get(CONFIG_ENV))
    return FirstSettings(target, people, url, found)
