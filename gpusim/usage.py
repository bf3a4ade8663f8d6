"""metrics.k8s.io/v1beta1: the resource usage metrics-server reports, for `kubectl top`.

metrics-server scrapes each kubelet's `/metrics/resource` every 15 s and answers NodeMetrics
and PodMetrics from memory (kubernetes-sigs/metrics-server pkg/api): `timestamp` is when the
window ended, `window` its length, usage in nanocores (`123456789n`) and kibibytes
(`1048576Ki`). The simulated machines run nothing, so the usage is made up, steadily: a
node uses a base (the system daemons) plus a share of what its running pods request, a pod
what its containers request scaled the same way; a pod that is not Running has no metrics
(metrics-server reports only pods it has two samples of), a node that is not Ready none
either (`kubectl top` then says "metrics not available yet" for it).

Pure functions of the objects they are given and the time: they must never write.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.kube_objects import (
    container_requests,
    labels_of,
    meta,
    name_of,
    namespace_of,
    spec_of,
    status_of,
)
from gpusim.objects import Json
from gpusim.reading import node_ready

WINDOW = "20.04s"
CPU_SHARE = 0.35
MEMORY_SHARE = 0.55
NODE_BASE_NANOCORES = 180_000_000
NODE_BASE_KIB = 1_843_200


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _metadata(obj: Json, now: datetime) -> Json:
    metadata: Json = {"name": name_of(obj), "creationTimestamp": _ts(now)}
    if namespace_of(obj):
        metadata["namespace"] = namespace_of(obj)
    if labels_of(obj):
        metadata["labels"] = dict(labels_of(obj))
    return metadata


def _container_usage(container: Json) -> Json:
    requests = container_requests(container)
    millicores = requests.get("cpu", 0) or 100
    memory = requests.get("memory", 0) or 128 * 1024 * 1024
    return {
        "cpu": f"{int(millicores * 1_000_000 * CPU_SHARE)}n",
        "memory": f"{int(memory * MEMORY_SHARE) // 1024}Ki",
    }


def pod_metrics(pod: Json, now: datetime) -> Json | None:
    """PodMetrics of a Running pod, None otherwise."""
    if status_of(pod).get("phase") != "Running" or meta(pod).get("deletionTimestamp"):
        return None
    return {
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": _metadata(pod, now),
        "timestamp": _ts(now - timedelta(seconds=5)),
        "window": WINDOW,
        "containers": [
            {"name": str(c.get("name", "")), "usage": _container_usage(c)}
            for c in spec_of(pod).get("containers") or []
        ],
    }


def node_metrics(node: Json, pods: list[Json], now: datetime) -> Json | None:
    """NodeMetrics of a Ready node from the pods running on it, None when it is not Ready."""
    if node_ready(node) != "True":
        return None
    nanocores, kib = NODE_BASE_NANOCORES, NODE_BASE_KIB
    for pod in pods:
        found = pod_metrics(pod, now)
        for container in (found or {}).get("containers", []):
            nanocores += int(container["usage"]["cpu"].removesuffix("n"))
            kib += int(container["usage"]["memory"].removesuffix("Ki"))
    return {
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": _metadata(node, now),
        "timestamp": _ts(now - timedelta(seconds=5)),
        "window": WINDOW,
        "usage": {"cpu": f"{nanocores}n", "memory": f"{kib}Ki"},
    }
