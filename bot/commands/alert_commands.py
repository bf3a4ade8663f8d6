"""`gpubot alerts explain`: how gpubot reads each Alertmanager alert of a payload file (the
alert mapping, docs/alerts.md), or why it does not, without running `gpubot serve`.

It parses its options, calls the alert readings' composition root (`bot.roots.alert_readings`)
and prints, as text or one JSON object per alert. This module must never read the payload
or the mapping itself, nor import at its top more than the other commands need
(bot/commands/shared.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.shared import ConfigOption, handles_bad_input, read_settings
from bot.outside_text import shown_name


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
    from bot.roots.alert_readings import read_alerts

    settings = read_settings(config)
    for alert in read_alerts(payload, snapshot, settings):
        reading, node = alert.understood, alert.node_found
        if as_json:
            typer.echo(
                json.dumps(
                    {**reading.as_json(), "status": alert.status, "node_found": node},
                    ensure_ascii=False,
                )
            )
            continue
        typer.echo(f"{reading.alertname or '(no alertname)'} ({alert.status}) → {reading.name}")
        for line in alert.explanation():
            typer.echo(line)
        absence = alert.absence(settings.lang)
        if absence is not None:
            typer.echo(f"  in the snapshot: {absence}")
        elif snapshot is not None and node != reading.node:
            typer.echo(f"  in the snapshot: node {shown_name(node or '')}")
        elif snapshot is not None and node is not None and reading.node_is_address:
            typer.echo(f"  in the snapshot: {node} is no node's nor pod's address")
