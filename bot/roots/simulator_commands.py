"""The composition root of `gpubot sim serve|inject|repair`: a simulated GPU cluster started
for scripts and people (its API, exporters, kubeconfig and ServiceAccounts), and faults
made or taken away on one that is running.

It exists so that the sim commands only parse their options and print, and so that the
simulator is reached from gpubot in as few places as possible (.importlinter: "Only the
demo, drill and sim commands import the simulator"). It must never be imported by the serve
root, nor import anything of gpubot's serving code: the simulator stands alone."""

from __future__ import annotations

import base64
import json
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from bot.errors import InputError
from gpusim.launching import SimulatorError, inject_remote, repair_remote, start_simulator
from gpusim.scenarios import SCENARIOS


def serve_simulator(
    *,
    scenario: str,
    nodes: int | None,
    port: int,
    metrics_port: int,
    state_metrics_port: int,
    pods_per_node: int | None,
    controllers: bool,
    rbac: list[Path],
    kubeconfig_out: Path | None,
    prometheus_config_out: Path | None,
    told: Callable[[str], None],
) -> None:
    """Serves until interrupted, telling `told` a line for each address and file; the last
    line is one JSON object (`gpubot sim: {...}`) with all of them, for a script to read."""
    if scenario not in SCENARIOS:
        known = ", ".join(SCENARIOS)
        raise InputError("--scenario", f"unknown scenario {scenario!r}; known: {known}")
    manifests = []
    for path in rbac:
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
    told(f"simulated cluster: {api.url} ({gpu_nodes} GPU nodes)")
    if kubeconfig_out is not None:
        api.write_kubeconfig(kubeconfig_out)
        told(f"kubeconfig: {kubeconfig_out}  (export KUBECONFIG={kubeconfig_out})")
    told(f"dcgm-exporter metrics: {simulation.metrics.url}/metrics/NODE")
    told(f"kube-state-metrics: {simulation.state_metrics.url}/metrics")
    accounts = {}
    for namespace, name in simulation.service_accounts():
        directory = api.service_account_dir(namespace, name)
        accounts[f"{namespace}/{name}"] = str(directory)
        told(f"serviceaccount {namespace}/{name}: {directory}  (GPUBOT_SERVICEACCOUNT_DIR)")
    if prometheus_config_out is not None:
        prometheus_config_out.write_text(
            yaml.safe_dump(simulation.prometheus_config(), sort_keys=False)
        )
        told(f"prometheus config: {prometheus_config_out}")
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
    told("gpubot sim: " + json.dumps(ready))
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        simulation.stop()


@contextmanager
def _sim_server(server: str | None, kubeconfig: Path | None) -> Iterator[str]:
    """The simulator's connection URL, given as it is or read from the kubeconfig it wrote
    (its CA and token put in files for as long as the call lasts: the URL names files)."""
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


def inject(
    server: str | None, kubeconfig: Path | None, fault: str, node: str, params: dict[str, Any]
) -> dict[str, Any]:
    """A fault made on a node of the simulator at `server` (or the one `kubeconfig` names):
    its description lines and the alerts it fires (a webhook payload)."""
    try:
        with _sim_server(server, kubeconfig) as url:
            return inject_remote(url, fault, node, params)
    except SimulatorError as exc:
        raise InputError("sim inject", str(exc)) from exc


def repair(
    server: str | None, kubeconfig: Path | None, fault: str, node: str, params: dict[str, Any]
) -> dict[str, Any]:
    """A fault taken away from a node of a running simulator (a cordon stays)."""
    try:
        with _sim_server(server, kubeconfig) as url:
            return repair_remote(url, fault, node, params)
    except SimulatorError as exc:
        raise InputError("sim repair", str(exc)) from exc
