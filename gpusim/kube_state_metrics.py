"""kube-state-metrics for a simulated cluster: `GET /metrics` on its own port, on 127.0.0.1.

The series kube-state-metrics v2 derives from the API objects, with its names, labels and
units (kubernetes/kube-state-metrics internal/store/node.go and pod.go,
docs/metrics/workload/pod-metrics.md and docs/metrics/cluster/node-metrics.md), for the
families gpubot's shipped alerts (deploy/prometheus/gpu-alerts.yaml) and the usual GPU
dashboards read:

- nodes: `kube_node_info`, `kube_node_created`, `kube_node_labels` (only the labels the
  deployment allows: `--metric-labels-allowlist=nodes=[nvidia.com/gpu.present,
  nvidia.com/gpu.product]`, as gpubot's deploy docs ask), `kube_node_spec_unschedulable`,
  `kube_node_spec_taint`, `kube_node_status_condition` (true / false / unknown),
  `kube_node_status_capacity` and `kube_node_status_allocatable` (`resource` with every
  character that is not a letter, digit or underscore made `_`, `unit` core / byte / integer);
- pods: `kube_pod_info`, `kube_pod_created`, `kube_pod_owner`, `kube_pod_status_phase` (one
  series per phase, 1 for the current one), `kube_pod_status_ready`,
  `kube_pod_container_status_restarts_total`, `kube_pod_container_status_waiting_reason`.

Read at scrape time from the `ClusterState`, as kube-state-metrics reads its informers' caches.
It serves what it reads and must never write to the cluster; it binds 127.0.0.1 only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from bot.kube_objects import labels_of, meta, name_of, namespace_of, quantity, spec_of, status_of
from gpusim.objects import Json
from gpusim.resources import BY_KIND
from gpusim.serving import LoopbackServer, get_handler
from gpusim.state import ClusterState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
NODE_LABELS_ALLOWED = ("nvidia.com/gpu.present", "nvidia.com/gpu.product")
_PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")
_HELP = {
    "kube_node_info": ("Information about a cluster node.", "gauge"),
    "kube_node_created": ("Unix creation timestamp", "gauge"),
    "kube_node_labels": (
        "Kubernetes labels converted to Prometheus labels.",
        "gauge",
    ),
    "kube_node_spec_unschedulable": (
        "Whether a node can schedule new pods.",
        "gauge",
    ),
    "kube_node_spec_taint": ("The taint of a cluster node.", "gauge"),
    "kube_node_status_condition": ("The condition of a cluster node.", "gauge"),
    "kube_node_status_capacity": ("The capacity for different resources of a node.", "gauge"),
    "kube_node_status_allocatable": (
        "The allocatable for different resources of a node that are available for scheduling.",
        "gauge",
    ),
    "kube_pod_info": ("Information about pod.", "gauge"),
    "kube_pod_created": ("Unix creation timestamp", "gauge"),
    "kube_pod_owner": ("Information about the Pod's owner.", "gauge"),
    "kube_pod_status_phase": ("The pods current phase.", "gauge"),
    "kube_pod_status_ready": ("Describes whether the pod is ready to serve requests.", "gauge"),
    "kube_pod_container_status_restarts_total": (
        "The number of container restarts per container.",
        "counter",
    ),
    "kube_pod_container_status_waiting_reason": (
        "Describes the reason the container is currently in waiting state.",
        "gauge",
    ),
}


def sanitize(name: str) -> str:
    """kube-state-metrics' label and resource names: `nvidia.com/gpu` -> `nvidia_com_gpu`."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_value(str(v))}"' for k, v in pairs.items()) + "}"


def _epoch(stamp: Any) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _unit_and_value(resource: str, amount: Any) -> tuple[str, float]:
    if resource == "cpu":
        return "core", quantity(amount, milli=True) / 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "byte", float(quantity(amount))
    return "integer", float(quantity(amount))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _node_series(node: Json, out: dict[str, list[str]]) -> None:
    name = name_of(node)
    status, spec = status_of(node), spec_of(node)
    info = status.get("nodeInfo") or {}
    internal = next(
        (a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"),
        "",
    )
    out["kube_node_info"].append(
        _labels(
            {
                "node": name,
                "kernel_version": info.get("kernelVersion", ""),
                "os_image": info.get("osImage", ""),
                "container_runtime_version": info.get("containerRuntimeVersion", ""),
                "kubelet_version": info.get("kubeletVersion", ""),
                "kubeproxy_version": info.get("kubeProxyVersion", "deprecated"),
                "provider_id": spec.get("providerID", ""),
                "pod_cidr": spec.get("podCIDR", ""),
                "system_uuid": info.get("systemUUID", ""),
                "internal_ip": internal or "",
            }
        )
        + " 1"
    )
    out["kube_node_created"].append(
        _labels({"node": name}) + f" {_number(_epoch(meta(node).get('creationTimestamp')))}"
    )
    allowed = {
        f"label_{sanitize(k)}": v for k, v in labels_of(node).items() if k in NODE_LABELS_ALLOWED
    }
    out["kube_node_labels"].append(_labels({"node": name, **dict(sorted(allowed.items()))}) + " 1")
    out["kube_node_spec_unschedulable"].append(
        _labels({"node": name}) + f" {1 if spec.get('unschedulable') else 0}"
    )
    for taint in spec.get("taints") or []:
        out["kube_node_spec_taint"].append(
            _labels(
                {
                    "node": name,
                    "key": taint.get("key", ""),
                    "value": taint.get("value", ""),
                    "effect": taint.get("effect", ""),
                }
            )
            + " 1"
        )
    for condition in status.get("conditions") or []:
        current = str(condition.get("status", "")).lower()
        for state in ("true", "false", "unknown"):
            out["kube_node_status_condition"].append(
                _labels({"node": name, "condition": condition.get("type", ""), "status": state})
                + f" {1 if current == state else 0}"
            )
    for family, key in (
        ("kube_node_status_capacity", "capacity"),
        ("kube_node_status_allocatable", "allocatable"),
    ):
        for resource, amount in sorted((status.get(key) or {}).items()):
            unit, value = _unit_and_value(resource, amount)
            out[family].append(
                _labels({"node": name, "resource": sanitize(resource), "unit": unit})
                + f" {_number(value)}"
            )


def _pod_series(pod: Json, out: dict[str, list[str]]) -> None:
    namespace, name = namespace_of(pod), name_of(pod)
    uid = str(meta(pod).get("uid", ""))
    spec, status = spec_of(pod), status_of(pod)
    owner: Json = next(
        (r for r in meta(pod).get("ownerReferences") or [] if r.get("controller")), {}
    )
    base = {"namespace": namespace, "pod": name, "uid": uid}
    out["kube_pod_info"].append(
        _labels(
            {
                **base,
                "host_ip": status.get("hostIP", ""),
                "pod_ip": status.get("podIP", ""),
                "node": spec.get("nodeName", ""),
                "created_by_kind": owner.get("kind", "<none>"),
                "created_by_name": owner.get("name", "<none>"),
                "priority_class": spec.get("priorityClassName", ""),
                "host_network": "true" if spec.get("hostNetwork") else "false",
            }
        )
        + " 1"
    )
    out["kube_pod_created"].append(
        _labels(base) + f" {_number(_epoch(meta(pod).get('creationTimestamp')))}"
    )
    out["kube_pod_owner"].append(
        _labels(
            {
                **base,
                "owner_kind": owner.get("kind", "<none>"),
                "owner_name": owner.get("name", "<none>"),
                "owner_is_controller": "true" if owner else "<none>",
            }
        )
        + " 1"
    )
    phase = str(status.get("phase") or "Pending")
    for candidate in _PHASES:
        out["kube_pod_status_phase"].append(
            _labels({**base, "phase": candidate}) + f" {1 if candidate == phase else 0}"
        )
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is not None:
        current = str(ready.get("status", "")).lower()
        for state in ("true", "false", "unknown"):
            out["kube_pod_status_ready"].append(
                _labels({**base, "condition": state}) + f" {1 if current == state else 0}"
            )
    for container in status.get("containerStatuses") or []:
        labels = {**base, "container": str(container.get("name", ""))}
        out["kube_pod_container_status_restarts_total"].append(
            _labels(labels) + f" {int(container.get('restartCount') or 0)}"
        )
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            out["kube_pod_container_status_waiting_reason"].append(
                _labels({**labels, "reason": str(waiting["reason"])}) + " 1"
            )


def render(store: ClusterState) -> bytes:
    """Every family, as kube-state-metrics' /metrics prints them."""
    out: dict[str, list[str]] = {family: [] for family in _HELP}
    nodes, _ = store.list(BY_KIND["Node"], "")
    for node in nodes:
        _node_series(node, out)
    pods, _ = store.list(BY_KIND["Pod"], "")
    for pod in pods:
        _pod_series(pod, out)
    lines: list[str] = []
    for family, (text, kind) in _HELP.items():
        lines += [f"# HELP {family} {text}", f"# TYPE {family} {kind}"]
        lines += [family + sample for sample in out[family]]
    return ("\n".join(lines) + "\n").encode()


class KubeStateMetricsServer:
    """`GET /metrics`: the cluster's kube-state-metrics series; `GET /healthz`: ok."""

    def __init__(self, store: ClusterState, port: int = 0) -> None:
        self.store = store
        self._http = LoopbackServer(get_handler(self._handle), port, "sim-kube-state-metrics")

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    def start(self) -> KubeStateMetricsServer:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = urlsplit(handler.path).path
        if path == "/metrics":
            try:
                code, body, content_type = 200, render(self.store), CONTENT_TYPE
            except Exception as exc:  # the server stays up whatever a request does
                code, body, content_type = 500, f"{exc}\n".encode(), "text/plain"
        elif path in ("/healthz", "/livez", "/readyz"):
            code, body, content_type = 200, b"OK", "text/plain"
        else:
            code, body, content_type = 404, b"404 page not found\n", "text/plain"
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


@contextmanager
def running(store: ClusterState) -> Iterator[KubeStateMetricsServer]:
    server = KubeStateMetricsServer(store).start()
    try:
        yield server
    finally:
        server.stop()
