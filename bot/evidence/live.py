"""A snapshot read from a live API (the Cluster port), for the same facts code as files."""

from __future__ import annotations

from bot.evidence.snapshot import Snapshot
from bot.ports import Cluster


def read_snapshot(cluster: Cluster, node: str | None = None) -> Snapshot:
    """The whole cluster, or what the facts of one node need: every node (for its pool),
    the node's pods and events, pending pods and their scheduling events, PDBs, DaemonSets."""
    nodes = cluster.list("Node")
    if node is None:
        pods = cluster.list("Pod")
        events = cluster.list("Event")
    else:
        pods = cluster.list("Pod", field_selector=f"spec.nodeName={node}")
        pods += cluster.list("Pod", field_selector="spec.nodeName=,status.phase=Pending")
        events = cluster.list(
            "Event", field_selector=f"involvedObject.kind=Node,involvedObject.name={node}"
        )
        events += cluster.list("Event", field_selector="reason=FailedScheduling")
    return Snapshot(
        nodes=list(nodes),
        pods=list(pods),
        events=list(events),
        pdbs=list(cluster.list("PodDisruptionBudget")),
        daemonsets=list(cluster.list("DaemonSet")),
    )
