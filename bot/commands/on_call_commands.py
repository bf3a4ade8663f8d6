"""`gpubot approve`, `deny`, `timeline` and `digest`: what the on-call does from a terminal
beside the chat, on the store a running `gpubot serve` keeps.

They parse their options, call the store commands' composition root
(`bot.roots.store_commands`), print and pick the exit code: 2 for bad input or a vote the
policy refuses, 1 when an approved action was refused or failed or did not run in time. This
module must never open the store or judge a vote itself (the root and the policy do), nor
import at its top more than the other commands need (bot/commands/shared.py)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bot.commands.shared import (
    ConfigOption,
    Format,
    LangOption,
    StoreUrlOption,
    handles_bad_input,
    read_settings,
    settings_said,
    stderr,
    terminal,
)
from bot.errors import InputError
from bot.texts import say, state_name


@handles_bad_input
def timeline(
    what: Annotated[
        str, typer.Argument(metavar="INCIDENT|NODE", help="An incident id, or a node name.")
    ],
    store_url: StoreUrlOption = None,
    output: Annotated[Format, typer.Option("--format")] = Format.TEXT,
    lang: LangOption = None,
    config: ConfigOption = None,
) -> None:
    """An incident's timeline (or every incident of a node): who did what, when."""
    from rich.text import Text

    from bot.chat.console import render_timeline, timeline_markdown
    from bot.roots import store_commands

    settings = read_settings(config)
    language = lang or settings.lang
    found = store_commands.timelines(store_url or settings.store_url, what)
    console = terminal()
    for incident, entries in found:
        if output is Format.JSON:
            print(
                json.dumps(
                    {
                        "incident": incident.model_dump(mode="json"),
                        "timeline": [e.model_dump(mode="json") for e in entries],
                    },
                    ensure_ascii=False,
                )
            )
        elif output is Format.MARKDOWN:
            heading = say(language, "console.incident", id=incident.id).capitalize()
            state = state_name(incident.state.value, language)
            print(f"## {heading}: {incident.title} ({state})\n")
            print(timeline_markdown(entries, language))
        else:
            heading = say(language, "console.incident", id=incident.id)
            console.rule(Text(f"{heading}: {incident.title}"))
            console.print(render_timeline(entries, language))


@handles_bad_input
def digest(
    hours: Annotated[float, typer.Option("--hours", min=1, help="The window, ending now.")] = 24,
    tz: Annotated[
        str | None, typer.Option("--tz", help="IANA time zone; default schedule.digest_tz.")
    ] = None,
    store_url: StoreUrlOption = None,
    lang: LangOption = None,
    config: ConfigOption = None,
) -> None:
    """The digest serve posts daily: incidents opened and resolved, nodes still out,
    repeat offenders, top symptoms, median time to recover. It reads no cluster: nodes out
    of service are those the timelines show, and it says so."""
    from bot.roots import store_commands

    settings = read_settings(config)
    zone_name = tz or settings.schedule.digest_tz
    language = lang or settings.lang
    print(store_commands.digest_text(store_url or settings.store_url, hours, zone_name, language))


@handles_bad_input
def approve(
    request: Annotated[
        str, typer.Argument(metavar="REQUEST_ID", help="The request id the proposal shows.")
    ],
    as_user: Annotated[
        str,
        typer.Option(
            "--as",
            metavar="USER",
            help="Who approves: a user id the settings' remediation.approvals name.",
        ),
    ],
    store_url: StoreUrlOption = None,
    wait_s: Annotated[
        float,
        typer.Option(
            "--wait",
            min=0,
            help="Seconds to wait for the leading serve to act on it and say how it ended "
            "(exit 1 when it was refused or failed); 0 returns once the vote is recorded.",
        ),
    ] = 120.0,
    config: ConfigOption = None,
) -> None:
    """Record an approval from the command line (a break-glass path beside the chat). The
    policy decides as for a click; the leading `gpubot serve` executes it, and this command
    waits to tell how that ended: "approved" is not "done"."""
    from bot.roots import store_commands

    settings = read_settings(config)
    with store_commands.ballot(settings, store_url or settings.store_url, create=False) as votes:
        outcome = votes.approve(request, as_user)
        if outcome.status not in ("approved", "need-another"):
            stderr().print(
                say(
                    settings.lang,
                    "cli.approve.refused",
                    why=outcome.message,
                    settings=settings_said(config, settings.lang),
                ),
                markup=False,
            )
            raise typer.Exit(2)
        if outcome.status == "need-another":
            print(
                say(settings.lang, "cli.approve.need_another", decision=outcome.message),
                flush=True,
            )
            return
        print(say(settings.lang, "cli.approve.recorded", decision=outcome.message), flush=True)
        if wait_s == 0:
            return
        execution = votes.finished_execution(request, wait_s)
    if execution is None:
        stderr().print(
            say(settings.lang, "cli.approve.not_run", seconds=f"{wait_s:g}", user=as_user),
            markup=False,
        )
        raise typer.Exit(1)
    line = f"{execution.outcome}: {execution.detail}"
    if execution.outcome not in ("succeeded", "dry-run"):
        stderr().print(line, markup=False)
        raise typer.Exit(1)
    print(line)


@handles_bad_input
def deny(
    request: Annotated[
        str, typer.Argument(metavar="REQUEST_ID", help="The request id from the proposal.")
    ],
    as_user: Annotated[str, typer.Option("--as", help="Who denies (a chat user id).")],
    reason: Annotated[str, typer.Option("--reason", help="Why, for the timeline.")] = "",
    store_url: Annotated[str | None, typer.Option("--store-url")] = None,
    config: ConfigOption = None,
) -> None:
    """Record a denial from the command line (beside the chat's Deny button). A denial is
    final, so the policy decides who may, as for an approval: the request's approvers,
    whoever asked for it, or `remediation.approvals.deny`; anyone else is exit 2."""
    from bot.roots import store_commands

    settings = read_settings(config)
    # The store is opened as serve opens it (made when missing), as deny always has.
    with store_commands.ballot(settings, store_url or settings.store_url, create=True) as votes:
        outcome = votes.deny(request, as_user, reason)
    if outcome.status != "denied":
        raise InputError("--as", outcome.message)
    print(outcome.message, flush=True)
