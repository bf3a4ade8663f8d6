"""`gpubot serve`: the bot itself, its options turned into settings and handed to the serve
composition root (`bot.roots.serve`), which runs until the process is stopped.

It exists apart from the other commands because its options are the deployment's (the
cluster, the store, the replica's identity, the log): the Helm chart and the supervisors
start it with them. It must never import the simulator, directly or through a root
(.importlinter: serve-never-loads-the-simulator), nor compose the replica itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.commands.shared import ConfigOption, handles_bad_input, read_settings
from bot.process.logs import LogFormat


@handles_bad_input
def serve(
    config: ConfigOption = None,
    port: Annotated[int | None, typer.Option("--port", help="0 picks a free port.")] = None,
    kube_url: Annotated[
        str | None,
        typer.Option("--kube-url", metavar="URL", help="An API server URL (e.g. the simulator's)."),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            metavar="FILE",
            help="The kubeconfig to reach the cluster with (its current context). Default: "
            "$KUBECONFIG, else ~/.kube/config.",
        ),
    ] = None,
    in_cluster: Annotated[
        bool,
        typer.Option(
            "--in-cluster",
            help="Use the pod's ServiceAccount (when gpubot runs in the cluster, as the Helm "
            "chart runs it).",
        ),
    ] = False,
    store_url: Annotated[
        str | None,
        typer.Option(
            "--store-url",
            metavar="URL",
            help="Where incidents and approvals are kept (sqlite:///FILE, created if missing, "
            "or postgresql://... for several replicas); default: store_url in the settings.",
        ),
    ] = None,
    identity: Annotated[
        str | None, typer.Option("--identity", help="This replica's name in the leader Lease.")
    ] = None,
    watch: Annotated[bool, typer.Option("--watch/--no-watch")] = True,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level",
            metavar="LEVEL",
            help="debug, info, warning or error (to stderr). info: listening, leader "
            "changes, diagnoses posted, actions, errors.",
        ),
    ] = "info",
    log_format: Annotated[
        LogFormat | None,
        typer.Option(
            "--log-format",
            help="Default: console on a terminal, json (one object a line) otherwise.",
        ),
    ] = None,
) -> None:
    """Run the bot: the Alertmanager webhook, the Kubernetes watches, leader election,
    scheduled work and the executor.

    Messages go to Slack when slack.bot_token is set (README, "Slack in five steps"), else
    to the output of the replica that leads (console chat: with one replica, this process,
    once it holds the leader Lease), where each proposal names its request id for
    `gpubot approve REQUEST --as YOU`. With several replicas on one store (PostgreSQL), every
    replica's messages print there, in order per incident (the gpubot_leader gauge on
    /metrics says which replica leads)."""
    from bot.process.logs import configure_logging
    from bot.roots import serve as runtime

    configure_logging(log_level, log_format)
    settings = read_settings(config)
    serve_settings = settings.serve.model_copy(
        update={k: v for k, v in {"port": port, "identity": identity}.items() if v is not None}
    )
    settings = settings.model_copy(
        update={"serve": serve_settings, "store_url": store_url or settings.store_url}
    )
    replica = runtime.build_replica(
        settings, kube_url=kube_url, kubeconfig=kubeconfig, in_cluster=in_cluster, watch=watch
    )
    # One line a supervisor (or a test) can wait for: the port actually bound.
    runtime.run(
        replica,
        on_started=lambda bound: print(
            f"gpubot serve: listening on {bound} (address {settings.serve.host}; "
            f"store {replica.store.url})",
            flush=True,
        ),
    )
