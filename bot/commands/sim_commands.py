"""`gpubot sim serve|inject|repair`: a simulated GPU cluster for people and scripts, and
faults made or taken away on a running one.

They parse their options, call the simulator commands' composition root
(`bot.roots.simulator_commands`) and print. This module must never import the simulator
(`gpusim`) itself, at its top or in a command: only the root does, when a sim command runs
(tests/unit/test_layout.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.commands.shared import handles_bad_input
from bot.errors import InputError


@handles_bad_input
def sim_serve(
    port: Annotated[int, typer.Option("--port", help="0 picks a free port.")] = 0,
    scenario: Annotated[
        str, typer.Option("--scenario", help="gpu-pool (4 nodes) or large (5,000 nodes).")
    ] = "gpu-pool",
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", min=1, max=5000, help="8-GPU nodes (overrides the scenario)."),
    ] = None,
    kubeconfig_out: Annotated[
        Path | None, typer.Option("--kubeconfig-out", help="Write a kubeconfig for kubectl here.")
    ] = None,
    pods_per_node: Annotated[
        int | None,
        typer.Option("--pods-per-node", min=1, max=100, help="Workload pods per GPU node."),
    ] = None,
    controllers: Annotated[
        bool,
        typer.Option(
            "--controllers/--no-controllers",
            help="Run the simulated scheduler, kubelet and controllers "
            "(evicted pods come back Pending).",
        ),
    ] = True,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="dcgm-exporter's port; 0 picks a free one.")
    ] = 0,
    state_metrics_port: Annotated[
        int,
        typer.Option("--state-metrics-port", help="kube-state-metrics' port; 0 picks a free one."),
    ] = 0,
    rbac: Annotated[
        list[Path] | None,
        typer.Option(
            "--rbac",
            help="YAML of ServiceAccounts, Roles, ClusterRoles and bindings to load "
            "(e.g. `helm template`'s output; other kinds are skipped). Repeatable.",
        ),
    ] = None,
    prometheus_config_out: Annotated[
        Path | None,
        typer.Option(
            "--prometheus-config-out",
            help="Write a Prometheus configuration scraping the simulator's exporters here.",
        ),
    ] = None,
) -> None:
    """Serve a simulated GPU cluster on 127.0.0.1 until interrupted.

    The last line printed is one JSON object (`gpubot sim: {...}`) with every address and
    file a script needs: the API's address and connection URL, the kubeconfig, the CA, the
    exporters' URLs and ports, each ServiceAccount's token directory."""
    from bot.roots.simulator_commands import serve_simulator

    serve_simulator(
        scenario=scenario,
        nodes=nodes,
        port=port,
        metrics_port=metrics_port,
        state_metrics_port=state_metrics_port,
        pods_per_node=pods_per_node,
        controllers=controllers,
        rbac=rbac or [],
        kubeconfig_out=kubeconfig_out,
        prometheus_config_out=prometheus_config_out,
        told=typer.echo,
    )


SimServerOption = Annotated[
    str | None,
    typer.Option("--server", metavar="URL", help="The URL `gpubot sim serve` printed."),
]
SimKubeconfigOption = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
        help="Or the kubeconfig `gpubot sim serve --kubeconfig-out` wrote.",
    ),
]


def _param(text: str) -> tuple[str, Any]:
    """A `--param KEY=VALUE` typed as the simulator's fault endpoint reads it: a code is a
    number and a flag a boolean there, not the text typed."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InputError("--param", f"expected KEY=VALUE, got {text!r}")
    if value.lstrip("-").isdigit():
        return key, int(value)
    if value in ("true", "false"):
        return key, value == "true"
    return key, value


@handles_bad_input
def sim_inject(
    fault: Annotated[
        str, typer.Argument(help="zero-capacity, plugin-crashloop, xid, ecc-dbe, ...")
    ],
    node: Annotated[str, typer.Option("--node")],
    server: SimServerOption = None,
    kubeconfig: SimKubeconfigOption = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", help="KEY=VALUE, e.g. code=79.")
    ] = None,
    alerts_out: Annotated[
        Path | None,
        typer.Option("--alerts-out", help="Write the alerts it fires (webhook payload)."),
    ] = None,
) -> None:
    """Make a fault happen on a node of a running simulated cluster."""
    from bot.roots.simulator_commands import inject

    params = dict(_param(p) for p in param or [])
    result = inject(server, kubeconfig, fault, node, params)
    for line in result["description"]:
        typer.echo(line)
    if alerts_out is not None:
        alerts_out.write_text(json.dumps(result["payload"], indent=2))


@handles_bad_input
def sim_repair(
    fault: Annotated[
        str, typer.Argument(help="The fault to take away: zero-capacity, xid, not-ready, ...")
    ],
    node: Annotated[str, typer.Option("--node")],
    server: SimServerOption = None,
    kubeconfig: SimKubeconfigOption = None,
    param: Annotated[list[str] | None, typer.Option("--param", help="KEY=VALUE.")] = None,
) -> None:
    """Take a fault away from a node of a running simulated cluster (a cordon stays)."""
    from bot.roots.simulator_commands import repair

    params = dict(_param(p) for p in param or [])
    result = repair(server, kubeconfig, fault, node, params)
    for line in result["description"]:
        typer.echo(line)
