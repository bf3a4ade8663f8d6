"""`gpubot`: the command line. Bad input is one line on stderr and exit code 2, never a trace.

Over 600 lines because it is every command's argument parsing and output, one short function
each; the work itself is in `bot.roots`. Every command imports what it uses inside itself
(compositions, rich, the linter, the console renderer), so that starting `gpubot` costs only
typer and the names its options are typed with: `gpubot diagnose --format json` never loads
rich, the serving stack or the simulator (benchmarks/startup.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.commands import (
    offline_commands,
    on_call_commands,
    rehearsal_commands,
    serve_command,
    setup_commands,
    sim_commands,
)
from bot.commands.plain_help import PlainArguments
from bot.commands.shared import ConfigOption, handles_bad_input
from bot.commands.shared import read_settings as _settings

# Plain help (click's): typer's rich tables print `<bool>` beside every flag and `--help`.
app = typer.Typer(
    help="gpubot: diagnoses GPU node lifecycle problems and proposes approved fixes.",
    rich_markup_mode=None,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(asked: bool) -> None:
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


@handles_bad_input
def alerts_explain(
    payload: Annotated[
        Path, typer.Argument(help="Alertmanager webhook payload (JSON/YAML), or a list of them.")
    ],
    snapshot: Annotated[
        Path | None,
        typer.Option(
            "--snapshot", help="kubectl JSON: find nodes the alerts name by an address or a pod."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per alert.")] = False,
    config: ConfigOption = None,
) -> None:
    """For each alert: how gpubot understands it (symptom, the gpubot alert the rules read it
    as, node, GPU, Xid code, and from where), or why it does not."""
    from bot.facts.collecting import resolve_signal_nodes
    from bot.facts.snapshots import load_snapshot
    from bot.sources.alertmanager.payloads import read_payloads, signals_from_payload
    from bot.sources.alertmanager.understanding import alert_mapping, explain, understand

    settings = _settings(config)
    mapping = alert_mapping(settings)
    nodes = load_snapshot(snapshot) if snapshot is not None else None
    for found in read_payloads(payload):
        readings = [understand(a, mapping, settings.node_labels) for a in found.alerts]
        resolved: list[str | None] = [r.node for r in readings]
        if nodes is not None:
            signals = signals_from_payload(found, settings.node_labels, mapping)
            resolved = [s.node for s in resolve_signal_nodes(nodes, signals)]
        for alert, reading, node in zip(found.alerts, readings, resolved, strict=True):
            if as_json:
                typer.echo(
                    json.dumps(
                        {
                            **reading.as_json(),
                            "status": alert.status,
                            "node_found": node,
                        },
                        ensure_ascii=False,
                    )
                )
                continue
            typer.echo(f"{reading.alertname or '(no alertname)'} ({alert.status}) → {reading.name}")
            for line in explain(reading):
                typer.echo(line)
            if nodes is not None and node != reading.node:
                typer.echo(f"  in the snapshot: node {node}")
            elif nodes is not None and node is not None and reading.node_is_address:
                typer.echo(f"  in the snapshot: {node} is no node's nor pod's address")


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
alerts_app.command("explain", cls=PlainArguments)(alerts_explain)


def main() -> None:  # pragma: no cover - console entry
    try:
        app()
    except SystemExit as done:
        from bot.process.ending import end_now

        end_now(done.code)  # returns unless the command asked to end at once
        raise
