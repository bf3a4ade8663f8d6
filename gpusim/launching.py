"""Starting a simulated cluster in this process, and injecting a fault into one that runs
elsewhere (and repairing it): what `gpubot sim serve`, `sim inject`, `sim repair`, `demo`
and the drills call. It wires the parts together and must never hold behaviour of its own:
what a fault or a repair does lives in the fault modules."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import yaml

from bot.kube_objects import name_of, namespace_of
from gpusim.apiserver import SimulatedApiServer
from gpusim.controllers import Controllers
from gpusim.exporter import DcgmExporterServer
from gpusim.hardware import gpu_count
from gpusim.kube_state_metrics import KubeStateMetricsServer
from gpusim.objects import Json
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster, owning_jobs
from gpusim.state import ClusterState


class SimulatorError(Exception):
    """A fault or repair the simulator refused, or no simulator answering; the message says
    which."""


@dataclass
class Simulation:
    """A running simulated cluster: its Kubernetes API, its dcgm-exporter endpoints and its
    kube-state-metrics."""

    api: SimulatedApiServer
    metrics: DcgmExporterServer
    controllers: Controllers | None
    state_metrics: KubeStateMetricsServer

    def stop(self) -> None:
        if self.controllers is not None:
            self.controllers.stop()
        self.state_metrics.stop()
        self.metrics.stop()
        self.api.stop()

    def service_accounts(self) -> list[tuple[str, str]]:
        accounts, _ = self.api.store.list(BY_KIND["ServiceAccount"], "")
        return [(namespace_of(a), name_of(a)) for a in accounts]

    def node_names(self) -> list[str]:
        nodes, _ = self.api.store.list(BY_KIND["Node"], "")
        return [name_of(n) for n in nodes]

    def prometheus_config(self, scrape_interval: str = "15s") -> Json:
        """A Prometheus configuration scraping this simulation's exporters: dcgm-exporter one
        target per GPU node (`instance` and `node` the node's name, as a Kubernetes service
        discovery relabeling gives them), kube-state-metrics one target."""
        targets = []
        for node in self.node_names():
            if gpu_count(self.api.store.get(BY_KIND["Node"], "", node)):
                netloc = f"127.0.0.1:{self.metrics.port}"
                targets.append(
                    {
                        "targets": [netloc],
                        "labels": {
                            "__metrics_path__": f"/metrics/{node}",
                            "instance": node,
                            "node": node,
                        },
                    }
                )
        return {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [
                {"job_name": "dcgm-exporter", "static_configs": targets},
                {
                    "job_name": "kube-state-metrics",
                    "honor_labels": True,
                    "static_configs": [{"targets": [f"127.0.0.1:{self.state_metrics.port}"]}],
                },
            ],
        }


def load_manifests(store: ClusterState, text: str) -> list[str]:
    """The objects of a multi-document YAML (`kubectl apply -f` style, e.g. a rendered Helm
    chart) that the simulator serves and stores, loaded as `kubectl apply` would create them;
    the kinds it does not serve are skipped. Returns `KIND NAMESPACE/NAME` of each loaded."""
    loaded: list[str] = []
    items: list[Json] = []
    for document in yaml.safe_load_all(text):
        if not isinstance(document, dict) or not document.get("kind"):
            continue
        resource = BY_KIND.get(str(document["kind"]))
        if resource is None or not resource.stored:
            continue
        body = dict(document)
        body.setdefault("metadata", {})
        if resource.namespaced:
            body["metadata"] = {"namespace": "default", **body["metadata"]}
        else:
            body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "namespace"}
        items.append(body)
        where = f"{body['metadata'].get('namespace')}/" if resource.namespaced else ""
        loaded.append(f"{resource.kind} {where}{body['metadata'].get('name')}")
    store.load(items)
    return loaded


def start_simulator(
    gpu_nodes: int,
    port: int = 0,
    metrics_port: int = 0,
    pods_per_node: int = 2,
    controllers: bool = True,
    *,
    state_metrics_port: int = 0,
    manifests: str = "",
) -> Simulation:
    """The API, the dcgm-exporter endpoints, kube-state-metrics and (unless asked not to) the
    simulated scheduler, kubelet, node lifecycle, ReplicaSet/Job and DaemonSet controllers;
    `manifests` (YAML) is loaded before anything serves (ServiceAccounts, RBAC)."""
    store = ClusterState()
    items = healthy_cluster(gpu_nodes, datetime.now(UTC), pods_per_node=pods_per_node)["items"]
    store.load(items + owning_jobs(items))
    if manifests:
        load_manifests(store, manifests)
    api = SimulatedApiServer(store, port).start()
    loops = Controllers(store) if controllers else None
    if loops is not None:
        loops.start()
    return Simulation(
        api,
        DcgmExporterServer(store, metrics_port).start(),
        loops,
        KubeStateMetricsServer(store, state_metrics_port).start(),
    )


def inject_remote(server: str, fault: str, node: str, params: dict[str, Any]) -> dict[str, Any]:
    """POST to a running simulator's fault endpoint; a 4xx becomes a `SimulatorError`."""
    return _control(server, "/_sim/faults", fault, node, params)


def repair_remote(server: str, fault: str, node: str, params: dict[str, Any]) -> dict[str, Any]:
    """POST to a running simulator's repair endpoint; a 4xx becomes a `SimulatorError`."""
    return _control(server, "/_sim/repairs", fault, node, params)


def _control(
    server: str, path: str, fault: str, node: str, params: dict[str, Any]
) -> dict[str, Any]:
    """POST to the control endpoint of the server a connection URL names (see
    `gpusim.apiserver`), trusting its `certificate-authority` and sending its token."""
    parts = urlsplit(server)
    query = dict(parse_qsl(parts.query))
    headers = {"Content-Type": "application/json"}
    context: ssl.SSLContext | None = None
    try:
        if query.get("token-file"):
            token = Path(query["token-file"]).read_text().strip()
            headers["Authorization"] = f"Bearer {token}"
        if query.get("certificate-authority"):
            context = ssl.create_default_context(cafile=query["certificate-authority"])
    except OSError as exc:
        raise SimulatorError(f"{server}: no simulator answers: {exc}") from exc
    body = json.dumps({"fault": fault, "node": node, "params": params}).encode()
    address = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, "", ""))
    request = urllib.request.Request(address, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result
    except urllib.error.HTTPError as exc:
        message = json.loads(exc.read()).get("message", str(exc))
        raise SimulatorError(f"{fault}: {message}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SimulatorError(f"{server}: no simulator answers: {exc}") from exc
