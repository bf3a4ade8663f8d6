"""A snapshot read from a live API (the Cluster port), for the same facts code as files."""

from __future__ import annotations

from collections.abc import Collection

from bot.facts.snapshots import Snapshot
from bot.ports import Cluster


def read_snapshot(cluster: Cluster, node: str | None = None) -> Snapshot:
    """The whole cluster, or what the facts of one node need (see `read_scoped`)."""
    if node is None:
        return Snapshot(
            nodes=list(cluster.list("Node")),
            pods=list(cluster.list("Pod")),
            events=list(cluster.list("Event")),
            pdbs=list(cluster.list("PodDisruptionBudget")),
            daemonsets=list(cluster.list("DaemonSet")),
            every_daemonset=True,
        )
    return read_scoped(cluster, [node])


def read_scoped(cluster: Cluster, nodes: Collection[str]) -> Snapshot:
    """What the facts of `nodes` need, without every pod of the cluster: every node (for
    pools and pool-wide rules), the pods and events of `nodes`, pending pods and their
    scheduling events, PDBs, DaemonSets. Facts of other nodes read from this lack their pods:
    only the diagnoses of `nodes` (and of pools) mean anything.

    One list after another: asking them at once was no faster against the simulator (a
    Python server), and a real API server answers these small lists in milliseconds."""
    pods = []
    events = []
    for name in sorted(nodes):
        pods += cluster.list("Pod", field_selector=f"spec.nodeName={name}")
        events += cluster.list(
            "Event", field_selector=f"involvedObject.kind=Node,involvedObject.name={name}"
        )
    pods += cluster.list("Pod", field_selector="spec.nodeName=,status.phase=Pending")
    events += cluster.list("Event", field_selector="reason=FailedScheduling")
    return Snapshot(
        nodes=list(cluster.list("Node")),
        pods=list(pods),
        events=list(events),
        pdbs=list(cluster.list("PodDisruptionBudget")),
        daemonsets=list(cluster.list("DaemonSet")),
        every_daemonset=True,
    )


def read_to_take_out(cluster: Cluster, node: str, *, pods: bool) -> Snapshot:
    """What the last check before a cordon (`pods` False) or drain needs: every node (the
    node itself, and its pool for the blast radius), and for a drain the node's pods (those
    it would evict). A cordon moves no pod, so its one read is the node list: with its
    patch, as many requests as `kubectl cordon`. Events, pending pods, PDBs and DaemonSets
    change nothing that check compares.

    Every node, not a label selector on the node's pool: a pool is the first of several
    labels a node carries (`Settings.pool_labels`), so one selector could miss members named
    by another, and the blast radius would count too few out of service."""
    return Snapshot(
        nodes=list(cluster.list("Node")),
        pods=list(cluster.list("Pod", field_selector=f"spec.nodeName={node}")) if pods else [],
    )
