"""Cordon, uncordon, taints and annotations on one node, as kubectl does them.

These are the primitives only: whether one may run (approval, re-check, blast radius) is the
executor's business, never these functions'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.ports import Cluster

MAINTENANCE_TAINT = "gpubot.io/maintenance"


@dataclass(frozen=True)
class NodeChange:
    node: str
    changed: bool
    """False when the node already was as asked (kubectl's "already cordoned")."""


def cordon(cluster: Cluster, node: str) -> NodeChange:
    current = cluster.get("Node", "", node)
    if (current.get("spec") or {}).get("unschedulable"):
        return NodeChange(node, changed=False)
    cluster.patch_node(node, {"spec": {"unschedulable": True}})
    return NodeChange(node, changed=True)


def uncordon(cluster: Cluster, node: str) -> NodeChange:
    current = cluster.get("Node", "", node)
    if not (current.get("spec") or {}).get("unschedulable"):
        return NodeChange(node, changed=False)
    # kubectl sends `unschedulable: null`: the field disappears, as on a never-cordoned node.
    cluster.patch_node(node, {"spec": {"unschedulable": None}})
    return NodeChange(node, changed=True)


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def add_taint(cluster: Cluster, node: str, key: str, value: str, effect: str) -> NodeChange:
    taints = _taints(cluster.get("Node", "", node))
    wanted = {"key": key, "value": value, "effect": effect}
    if any(
        t.get("key") == key and t.get("effect") == effect and t.get("value") == value
        for t in taints
    ):
        return NodeChange(node, changed=False)
    kept = [t for t in taints if not (t.get("key") == key and t.get("effect") == effect)]
    # Node taints have no patch merge key: the list is replaced whole, as kubectl taint does.
    cluster.patch_node(node, {"spec": {"taints": [*kept, wanted]}})
    return NodeChange(node, changed=True)


def remove_taint(cluster: Cluster, node: str, key: str) -> NodeChange:
    taints = _taints(cluster.get("Node", "", node))
    kept = [t for t in taints if t.get("key") != key]
    if len(kept) == len(taints):
        return NodeChange(node, changed=False)
    cluster.patch_node(node, {"spec": {"taints": kept or None}})
    return NodeChange(node, changed=True)


def annotate(cluster: Cluster, node: str, key: str, value: str | None) -> NodeChange:
    current = (cluster.get("Node", "", node).get("metadata") or {}).get("annotations") or {}
    if current.get(key) == value:
        return NodeChange(node, changed=False)
    cluster.patch_node(node, {"metadata": {"annotations": {key: value}}})
    return NodeChange(node, changed=True)
