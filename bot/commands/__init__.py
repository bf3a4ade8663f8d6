"""`gpubot`: the command line. Bad input is one line on stderr and exit code 2, never a trace.

Over 600 lines because it is every command's argument parsing and output, one short function
each; the work itself is in `bot.roots`. Every command imports what it uses inside itself
(compositions, rich, the linter, the console renderer), so that starting `gpubot` costs only
typer and the names its options are typed with: `gpubot diagnose --format json` never loads
rich, the serving stack or the simulator (benchmarks/startup.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.commands import (
    offline_commands,
    on_call_commands,
    rehearsal_commands,
    serve_command,
    setup_commands,
)
from bot.commands.plain_help import PlainArguments
from bot.commands.shared import ConfigOption, handles_bad_input
from bot.commands.shared import read_settings as _settings
from bot.errors import InputError

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
    import json

    from gpusim.launching import start_simulator
    from gpusim.scenarios import SCENARIOS

    if scenario not in SCENARIOS:
        known = ", ".join(SCENARIOS)
        raise InputError("--scenario", f"unknown scenario {scenario!r}; known: {known}")
    manifests = []
    for path in rbac or []:
        try:
            manifests.append(path.read_text())
        except OSError as exc:
            raise InputError("--rbac", f"{path}: {exc.strerror}") from exc
    size = SCENARIOS[scenario]
    gpu_nodes = nodes or size["gpu_nodes"]
    simulation = start_simulator(
        gpu_nodes,
        port,
        metrics_port,
        pods_per_node=pods_per_node or size["pods_per_node"],
        controllers=controllers,
        state_metrics_port=state_metrics_port,
        manifests="\n---\n".join(manifests),
    )
    api = simulation.api
    typer.echo(f"simulated cluster: {api.url} ({gpu_nodes} GPU nodes)")
    if kubeconfig_out is not None:
        api.write_kubeconfig(kubeconfig_out)
        typer.echo(f"kubeconfig: {kubeconfig_out}  (export KUBECONFIG={kubeconfig_out})")
    typer.echo(f"dcgm-exporter metrics: {simulation.metrics.url}/metrics/NODE")
    typer.echo(f"kube-state-metrics: {simulation.state_metrics.url}/metrics")
    accounts = {}
    for namespace, name in simulation.service_accounts():
        directory = api.service_account_dir(namespace, name)
        accounts[f"{namespace}/{name}"] = str(directory)
        typer.echo(f"serviceaccount {namespace}/{name}: {directory}  (GPUBOT_SERVICEACCOUNT_DIR)")
    if prometheus_config_out is not None:
        import yaml

        prometheus_config_out.write_text(
            yaml.safe_dump(simulation.prometheus_config(), sort_keys=False)
        )
        typer.echo(f"prometheus config: {prometheus_config_out}")
    ready = {
        "server": api.address,
        "url": api.url,
        "certificate_authority": str(api.credentials.ca_file),
        "kubeconfig": str(kubeconfig_out) if kubeconfig_out else None,
        "dcgm_exporter": simulation.metrics.url,
        "dcgm_exporter_port": simulation.metrics.port,
        "kube_state_metrics": simulation.state_metrics.url,
        "kube_state_metrics_port": simulation.state_metrics.port,
        "prometheus_config": str(prometheus_config_out) if prometheus_config_out else None,
        "serviceaccounts": accounts,
    }
    typer.echo("gpubot sim: " + json.dumps(ready))
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        simulation.stop()


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


@contextmanager
def _sim_server(server: str | None, kubeconfig: Path | None) -> Iterator[str]:
    """The simulator's connection URL, given as it is or read from the kubeconfig it wrote
    (its CA and token put in files for as long as the call lasts: the URL names files)."""
    import base64
    import tempfile

    import yaml

    if (server is None) == (kubeconfig is None):
        raise InputError("--server/--kubeconfig", "give exactly one of them")
    if server is not None:
        yield server
        return
    assert kubeconfig is not None
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        token = config["users"][0]["user"]["token"]
        address, ca = cluster["server"], base64.b64decode(cluster["certificate-authority-data"])
    except OSError as exc:
        raise InputError(str(kubeconfig), exc.strerror or str(exc)) from exc
    except (yaml.YAMLError, KeyError, IndexError, TypeError, ValueError) as exc:
        why = f"not a kubeconfig `gpubot sim serve` wrote ({exc})"
        raise InputError(str(kubeconfig), why) from exc
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "ca.crt").write_bytes(ca)
        (Path(folder) / "token").write_text(token)
        yield f"{address}?certificate-authority={folder}/ca.crt&token-file={folder}/token"


def _param(text: str) -> tuple[str, Any]:
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
    from gpusim.launching import SimulatorError, inject_remote

    params = dict(_param(p) for p in param or [])
    try:
        with _sim_server(server, kubeconfig) as url:
            result = inject_remote(url, fault, node, params)
    except SimulatorError as exc:
        raise InputError("sim inject", str(exc)) from exc
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
    from gpusim.launching import SimulatorError, repair_remote

    params = dict(_param(p) for p in param or [])
    try:
        with _sim_server(server, kubeconfig) as url:
            result = repair_remote(url, fault, node, params)
    except SimulatorError as exc:
        raise InputError("sim repair", str(exc)) from exc
    for line in result["description"]:
        typer.echo(line)


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
sim_app.command("serve", cls=PlainArguments)(sim_serve)
sim_app.command("inject", cls=PlainArguments)(sim_inject)
sim_app.command("repair", cls=PlainArguments)(sim_repair)
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
