"""The facts the last check before a cordon or drain compares, and no others: the node's own
facts (what its approval saw) and, of the other nodes of its pool, what the blast radius
counts (cordoned, Ready). `collect_facts` of the same objects would find everything every
rule may ask about every node (components, gate items, pending pods), which that check never
reads and which cost most of the time between an approval and the cordon.

Firing alerts are not read: none of what an approval saw (`facts_seen`) or the blast radius
comes from them.
"""

from __future__ import annotations

from datetime import datetime

from bot.config import Settings
from bot.facts.nodes import node_facts, pool_of, ready_status
from bot.facts.snapshots import Index, Snapshot
from bot.kube_objects import Obj, labels_of, name_of, spec_of, status_of
from bot.model import ClusterFacts, NodeFacts, PoolFacts, ReadyStatus


def take_out_facts(
    snapshot: Snapshot, node: str, settings: Settings, now: datetime
) -> ClusterFacts:
    """`node`'s facts, with its pods when `snapshot` holds them, and its pool: every member
    as a `service_state`. No other node, no pending pod, none of a pool's counts but its
    members. Nothing about `node` when the snapshot does not hold it."""
    target = next((n for n in snapshot.nodes if name_of(n) == node), None)
    if target is None:
        return ClusterFacts(
            observed_at=now, nodes={}, pools={}, pending_pods=[], offered_resources=[]
        )
    pool = pool_of(labels_of(target), settings.pool_labels)
    members = (
        [n for n in snapshot.nodes if pool_of(labels_of(n), settings.pool_labels) == pool]
        if pool is not None
        else [target]
    )
    nodes = {name_of(m): service_state(m, pool) for m in members if m is not target}
    # No GPU pools: being in one only names why the node is a GPU node, which no check reads.
    nodes[node] = node_facts(target, Index.build(snapshot), [], now, settings, set())
    pools = {}
    if pool is not None:
        pools[pool] = PoolFacts(
            name=pool,
            nodes=sorted(nodes),
            gpu_pool=False,
            driver_versions={},
            upgrade_states={},
            gpu_present=0,
            deploy_labelled=0,
        )
    return ClusterFacts(
        observed_at=now, nodes=nodes, pools=pools, pending_pods=[], offered_resources=[]
    )


def service_state(node: Obj, pool: str | None) -> NodeFacts:
    """What the blast radius reads of a node, as `node_facts` finds it: name, pool, cordon,
    readiness. The rest of its facts are left empty."""
    conditions = {
        str(c.get("type")): str(c.get("status")) for c in status_of(node).get("conditions") or []
    }
    return NodeFacts(
        name=name_of(node),
        pool=pool,
        ready=ready_status(conditions.get("Ready", "Unknown")),
        unschedulable=bool(spec_of(node).get("unschedulable")),
    )


def _ready(value: str) -> ReadyStatus:
    if value == "True":
        return "True"
    return "False" if value == "False" else "Unknown"
