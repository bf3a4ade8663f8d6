"""`gpubot`: the command line, one module per family of commands, wired here into one typer
app. Bad input is one line on stderr and exit code 2, never a trace (`shared`).

This package exists so that each command only parses its options, calls a composition root
in `bot.roots`, prints and picks the exit code; the work is in the roots. It must never
import at its top more than typer and the names the options are typed with: every command
imports what it uses inside itself (its root, rich, the linter, the console renderer), so
that `gpubot diagnose --format json` never loads rich, the serving stack or the simulator
(benchmarks/startup.py, tests/e2e/test_cli.py::test_diagnose_as_json_loads_only_what_it_uses).
"""

from __future__ import annotations

from typing import Annotated

import typer

from bot.commands import (
    alert_commands,
    offline_commands,
    on_call_commands,
    rehearsal_commands,
    serve_command,
    setup_commands,
    sim_commands,
)
from bot.commands.plain_help import PlainArguments

# Plain help (click's): typer's rich tables print `<bool>` beside every flag and `--help`.
app = typer.Typer(
    help="gpubot: diagnoses GPU node lifecycle problems and proposes approved fixes.",
    rich_markup_mode=None,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(asked: bool) -> None:
    """`--version` from the installed package's metadata, so that it cannot disagree with what
    pip installed."""
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"gpubot {version('gpubot')}")
        except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
            print("gpubot (not installed)")
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version, help="Print the version."),
    ] = False,
) -> None:
    """gpubot: diagnoses GPU node lifecycle problems and proposes approved fixes."""


def _group(name: str, about: str) -> typer.Typer:
    """A group of commands (`gpubot rules ...`) under `gpubot`, its help plain as theirs."""
    group = typer.Typer(rich_markup_mode=None, help=about, no_args_is_help=True)
    app.add_typer(group, name=name)
    return group


# Every command in one place, in the order `gpubot --help` lists them (commands, then groups).
app.command("diagnose", cls=PlainArguments)(offline_commands.diagnose_command)
app.command("demo", cls=PlainArguments)(rehearsal_commands.demo)
app.command("init", cls=PlainArguments)(setup_commands.init_command)
app.command("drill", cls=PlainArguments)(rehearsal_commands.drill_command)
app.command("timeline", cls=PlainArguments)(on_call_commands.timeline)
app.command("digest", cls=PlainArguments)(on_call_commands.digest)
app.command("serve", cls=PlainArguments)(serve_command.serve)
app.command("approve", cls=PlainArguments)(on_call_commands.approve)
app.command("deny", cls=PlainArguments)(on_call_commands.deny)
rules_app = _group("rules", "Check and test rule files.")
rules_app.command("lint", cls=PlainArguments)(offline_commands.rules_lint)
rules_app.command("test", cls=PlainArguments)(offline_commands.rules_test)
sim_app = _group("sim", "A simulated GPU cluster: the Kubernetes API kubectl trusts.")
sim_app.command("serve", cls=PlainArguments)(sim_commands.sim_serve)
sim_app.command("inject", cls=PlainArguments)(sim_commands.sim_inject)
sim_app.command("repair", cls=PlainArguments)(sim_commands.sim_repair)
db_app = _group("db", "The store's schema.")
db_app.command("upgrade", cls=PlainArguments)(setup_commands.db_upgrade)
alerts_app = _group(
    "alerts", "How gpubot reads Alertmanager alerts (the alert mapping, docs/alerts.md)."
)
alerts_app.command("explain", cls=PlainArguments)(alert_commands.alerts_explain)


def main() -> None:  # pragma: no cover - console entry
    """The `gpubot` console script: a command that asked to end at once (diagnose, whose heap
    is not freed object by object) ends here, after typer has said how it ended."""
    try:
        app()
    except SystemExit as done:
        from bot.process.ending import end_now

        end_now(done.code)  # returns unless the command asked to end at once
        raise
