"""Starting a simulated cluster in this process, and injecting a fault into one that runs
elsewhere (and repairing it): what `gpubot sim serve`, `sim inject`, `sim repair`, `demo`
and the drills call. It wires the parts together and must never hold behaviour of its own:
what a fault or a repair does lives in the fault modules."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpusim.apiserver import SimulatedApiServer
from gpusim.controllers import Controllers
from gpusim.exporter import DcgmExporterServer
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState


class SimulatorError(Exception):
    """A fault or repair the simulator refused, or no simulator answering; the message says
    which."""


@dataclass
class Simulation:
    """A running simulated cluster: its Kubernetes API and its dcgm-exporter endpoints."""

    api: SimulatedApiServer
    metrics: DcgmExporterServer
    controllers: Controllers | None

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()
        self.metrics.stop()
        self.api.stop()


def start_simulator(
    gpu_nodes: int,
    port: int = 0,
    metrics_port: int = 0,
    pods_per_node: int = 2,
    controllers: bool = True,
) -> Simulation:
    """The API, the dcgm-exporter endpoints and (unless asked not to) the simulated
    scheduler, kubelet, ReplicaSet/Job and DaemonSet controllers."""
    store = ClusterState()
    store.load(healthy_cluster(gpu_nodes, datetime.now(UTC), pods_per_node=pods_per_node)["items"])
    api = SimulatedApiServer(store, port).start()
    loops = Controllers(store) if controllers else None
    if loops is not None:
        loops.start()
    return Simulation(api, DcgmExporterServer(store, metrics_port).start(), loops)


def inject_remote(server: str, fault: str, node: str, params: dict[str, Any]) -> dict[str, Any]:
    """POST to a running simulator's fault endpoint; a 4xx becomes a `SimulatorError`."""
    return _control(server, "/_sim/faults", fault, node, params)


def repair_remote(server: str, fault: str, node: str, params: dict[str, Any]) -> dict[str, Any]:
    """POST to a running simulator's repair endpoint; a 4xx becomes a `SimulatorError`."""
    return _control(server, "/_sim/repairs", fault, node, params)


def _control(
    server: str, path: str, fault: str, node: str, params: dict[str, Any]
) -> dict[str, Any]:
    body = json.dumps({"fault": fault, "node": node, "params": params}).encode()
    request = urllib.request.Request(
        server.rstrip("/") + path,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result
    except urllib.error.HTTPError as exc:
        message = json.loads(exc.read()).get("message", str(exc))
        raise SimulatorError(f"{fault}: {message}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SimulatorError(f"{server}: no simulator answers: {exc}") from exc
