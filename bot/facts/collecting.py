"""Every fact the rules may ask about, for every node, pool and pending GPU pod: the one
entry point from a snapshot (and the firing alerts) to `ClusterFacts`.

What it must never do: read the cluster itself (the caller hands it a snapshot), or hold an
opinion (facts only; symptoms are the rule files' business).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from bot.config import Settings
from bot.errors import InputError
from bot.facts.nodes import GPU_PRESENT_LABEL, node_facts, pool_of, unknown_node
from bot.facts.pending import pending_pods
from bot.facts.snapshots import Index, Snapshot
from bot.gate.items import gate_failures
from bot.kube_objects import (
    Obj,
    labels_of,
    name_of,
    namespace_of,
    quantity,
    spec_of,
    status_of,
)
from bot.model import (
    ClusterFacts,
    NodeFacts,
    PoolFacts,
    Signal,
)


def resolve_signal_nodes(snapshot: Snapshot, signals: Sequence[Signal]) -> list[Signal]:
    """Alerts that name a node by an address (`instance` = IP) get the node's name.

    Alerts the alert mapping read as GPU alerts whose labels named no node, or only an
    address, carry the pods that tell it (`gpubot.pods`: the exporter pod that was scraped,
    the workload pod using the GPU); for those an address may also be a pod's IP (under the
    Prometheus Operator `instance` is the scraped pod's IP:port), and failing that the named
    pod's node is theirs. A GPU exporter runs on the node of the GPUs it reads, so its pod's
    node is the alert's; an alert the mapping does not know gets only the nodes' own
    addresses, since its target may run on any node."""
    names = {name_of(node) for node in snapshot.nodes}
    by_address = {
        str(address.get("address")): name_of(node)
        for node in snapshot.nodes
        for address in status_of(node).get("addresses") or []
        if isinstance(address, Mapping)
    }
    by_pod: dict[str, str] = {}
    by_pod_ip: dict[str, str] = {}

    def index_pods() -> None:
        # ("namespace/name" → node, pod IP → node) of the pods bound to a node; an IP held by
        # a running pod and by finished ones (IPs are reused) is the running pod's.
        for pod in snapshot.pods:
            bound = spec_of(pod).get("nodeName")
            if not isinstance(bound, str) or not bound:
                continue
            by_pod[f"{namespace_of(pod)}/{name_of(pod)}"] = bound
            status = status_of(pod)
            running = status.get("phase") in ("Running", "Pending")
            ips = [status.get("podIP")]
            ips += [a.get("ip") for a in status.get("podIPs") or [] if isinstance(a, Mapping)]
            for ip in ips:
                if isinstance(ip, str) and ip and (running or ip not in by_pod_ip):
                    by_pod_ip[ip] = bound

    resolved = []
    for signal in signals:
        if signal.node in names:
            resolved.append(signal)
            continue
        node = by_address.get(signal.node) if signal.node else None
        # `gpubot.pods`: bot.rules.loading.POD_REFS, written by the alert mapping.
        refs = signal.annotations.get("gpubot.pods", "").split()
        if node is None and refs:
            if not by_pod:
                index_pods()
            node = by_pod_ip.get(signal.node) if signal.node else None
            node = node or next((by_pod[ref] for ref in refs if ref in by_pod), None)
        if node is not None:
            signal = signal.model_copy(update={"node": node})
        resolved.append(signal)
    return resolved


def absent_nodes(
    snapshot: Snapshot, signals: Sequence[Signal]
) -> tuple[list[Signal], list[Signal]]:
    """`signals`, their nodes resolved (`resolve_signal_nodes`), as those about the cluster
    (naming one of its nodes exactly, or no node) and those naming a node it does not have.

    Exactly: `gpu-a1` with a zero-width space, a bidi control or a Cyrillic `а` is not
    `gpu-a1`, and can be no node at all (node names are DNS-1123 subdomains:
    `bot.outside_text.kubernetes_name`). A running bot reads the whole node list, so such a
    node is not there; a snapshot given offline may lack a node, which is why `collect_facts`
    still gives one that only alerts name facts (`NodeFacts.known` false) and the pass does
    not hand it those signals."""
    names = {name_of(node) for node in snapshot.nodes}
    present: list[Signal] = []
    absent: list[Signal] = []
    for signal in signals:
        (absent if signal.node and signal.node not in names else present).append(signal)
    return present, absent


def collect_facts(
    snapshot: Snapshot,
    signals: Sequence[Signal],
    settings: Settings,
    now: datetime,
    reuse: Callable[[Obj], NodeFacts | None] | None = None,
) -> ClusterFacts:
    """Everything the rules may ask about, for every node, pool and pending GPU pod.
    `reuse` may answer a node object with facts found earlier, taken as they are (a scoped
    pass has no pods of other nodes to find theirs again)."""
    index = Index.build(snapshot)
    signal_list = list(signals)
    gpu_pools = {
        pool
        for node in snapshot.nodes
        if (pool := pool_of(labels_of(node), settings.pool_labels))
        and (
            labels_of(node).get(GPU_PRESENT_LABEL) == "true"
            or quantity((status_of(node).get("capacity") or {}).get(settings.gpu_resource, 0)) > 0
        )
    }
    # Each node's firing alerts, grouped once: handing every node every alert grew as nodes
    # times alerts (5,000 nodes and 50,000 firing alerts: 250 million comparisons).
    firing: dict[str, list[Signal]] = defaultdict(list)
    for signal in signal_list:
        if signal.node and signal.status == "firing":
            firing[signal.node].append(signal)
    nodes = {}
    for node in snapshot.nodes:
        name = name_of(node)
        earlier = reuse(node) if reuse is not None else None
        if earlier is not None:
            nodes[name] = earlier
            continue
        try:
            nodes[name] = node_facts(node, index, firing[name], now, settings, gpu_pools)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # Valid JSON, wrong shape (a string where the API has a list...): say where.
            raise InputError(
                f"snapshot: Node {name}",
                f"it or one of its pods/events has an unexpected shape ({exc})",
            ) from exc
    for signal in signal_list:
        if signal.node and signal.node not in nodes:
            nodes[signal.node] = unknown_node(signal.node, firing[signal.node])
    offered = {
        resource for node in snapshot.nodes for resource in (status_of(node).get("capacity") or {})
    }
    pools: dict[str, list[NodeFacts]] = defaultdict(list)
    for facts in nodes.values():
        if facts.pool:
            pools[facts.pool].append(facts)
    pool_facts = {
        pool: PoolFacts(
            name=pool,
            nodes=sorted(f.name for f in members),
            gpu_pool=pool in gpu_pools,
            driver_versions=dict(Counter(f.driver_version for f in members if f.driver_version)),
            upgrade_states=dict(Counter(f.upgrade_state for f in members if f.upgrade_state)),
            gpu_present=sum(1 for f in members if f.gpu and f.gpu.present_label),
            deploy_labelled=sum(1 for f in members if f.deploy_labels),
        )
        for pool, members in pools.items()
    }
    for name, facts in nodes.items():
        if facts.gpu_node and facts.known:
            failing = gate_failures(facts, pool_facts, settings.gpu_resource)
            if failing != facts.gate_failures:
                nodes[name] = facts.model_copy(update={"gate_failures": failing})
    try:
        pending = pending_pods(snapshot, index, offered, nodes, now, settings)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise InputError("snapshot: pending pods", f"unexpected object shape ({exc})") from exc
    return ClusterFacts(
        observed_at=now,
        nodes=nodes,
        pools=pool_facts,
        pending_pods=pending,
        offered_resources=sorted(offered),
    )
