"""kube-controller-manager's node lifecycle controller (its tainting half) and the kubelet's
node Lease.

Taints (pkg/controller/nodelifecycle/node_lifecycle_controller.go): `doNoScheduleTaintingPass`
keeps one NoSchedule taint per node condition in `nodeConditionToTaintKeyStatusMap` (Ready
False -> `node.kubernetes.io/not-ready`, Ready Unknown -> `node.kubernetes.io/unreachable`,
MemoryPressure / DiskPressure / PIDPressure True -> `memory-pressure` / `disk-pressure` /
`pid-pressure`, NetworkUnavailable True -> `network-unavailable`) and
`node.kubernetes.io/unschedulable` while `spec.unschedulable` is set (a cordon); the NoExecute
pass keeps `not-ready` or `unreachable` NoExecute for a NotReady node. Both go through
`controller.SwapNodeControllerTaint`, which stamps every taint it adds with `timeAdded`; a taint
already there keeps its stamp, a taint the conditions no longer call for is removed, and taints
the controller does not manage (a person's, the GPU Operator's) are left as they are.

Leases (pkg/kubelet/nodelease, k8s.io/component-helpers/apimachinery/lease): every kubelet
keeps a Lease named after its node in `kube-node-lease`, owned by the Node, `holderIdentity`
the node name, `leaseDurationSeconds` 40 (nodeLeaseDurationSeconds), renewed every 10 s
(a quarter of the duration). A node whose kubelet stopped posting status (Ready Unknown, the
`not-ready` fault) stops renewing it, as a dead kubelet would. `kubectl describe node` shows it.

Each writes through the `ClusterState` API; neither schedules nor evicts (no taint-based
eviction: the NoExecute taint manager is not simulated).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.kube_objects import meta, name_of, spec_of, status_of
from gpusim.objects import Json, ts
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
_CONDITION_TAINTS = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
_NO_SCHEDULE_KEYS = {*_CONDITION_TAINTS.values(), UNSCHEDULABLE}
_NO_EXECUTE_KEYS = {NOT_READY, UNREACHABLE}
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40
RENEW_INTERVAL_S = 10


def _managed(taint: Json) -> bool:
    key, effect = taint.get("key"), taint.get("effect")
    return (effect == "NoSchedule" and key in _NO_SCHEDULE_KEYS) or (
        effect == "NoExecute" and key in _NO_EXECUTE_KEYS
    )


def wanted_taints(node: Json) -> list[tuple[str, str]]:
    """(key, effect) of every taint the controller keeps on `node` now."""
    wanted: list[tuple[str, str]] = []
    for condition in status_of(node).get("conditions") or []:
        key = _CONDITION_TAINTS.get((str(condition.get("type")), str(condition.get("status"))))
        if key:
            wanted.append((key, "NoSchedule"))
            if key in _NO_EXECUTE_KEYS:
                wanted.append((key, "NoExecute"))
    if spec_of(node).get("unschedulable"):
        wanted.append((UNSCHEDULABLE, "NoSchedule"))
    return wanted


def taint_nodes(store: ClusterState, nodes: list[Json], now: datetime) -> list[str]:
    """One tainting pass over `nodes`; a line per node whose taints changed."""
    changes: list[str] = []
    for node in nodes:
        taints = list(spec_of(node).get("taints") or [])
        wanted = wanted_taints(node)
        have = {(t.get("key"), t.get("effect")) for t in taints if _managed(t)}
        if have == set(wanted):
            continue
        kept = [t for t in taints if not _managed(t) or (t.get("key"), t.get("effect")) in wanted]
        added = [
            {"key": key, "effect": effect, "timeAdded": ts(now)}
            for key, effect in wanted
            if (key, effect) not in have
        ]
        try:
            store.patch(
                BY_KIND["Node"],
                "",
                name_of(node),
                "application/merge-patch+json",
                {
                    "metadata": {"resourceVersion": meta(node).get("resourceVersion")},
                    "spec": {"taints": (kept + added) or None},
                },
            )
        except ApiError:  # changed meanwhile (409) or gone (404): the next pass sees it
            continue
        shown = ", ".join(f"{k}:{e}" for k, e in sorted(wanted)) or "none"
        changes.append(f"{name_of(node)}: node lifecycle controller taints: {shown}")
    return changes


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def renew_leases(store: ClusterState, nodes: list[Json], now: datetime) -> list[str]:
    """Every live kubelet's Lease: created when missing, renewed when older than the renew
    interval; a node whose Ready condition is Unknown (its kubelet silent) is left alone."""
    leases = BY_KIND["Lease"]
    changes: list[str] = []
    for node in nodes:
        ready: Json = next(
            (c for c in status_of(node).get("conditions") or [] if c.get("type") == "Ready"), {}
        )
        if ready.get("status") == "Unknown":
            continue
        name = name_of(node)
        try:
            lease = store.get(leases, LEASE_NAMESPACE, name)
        except ApiError:
            lease = None
        if lease is None:
            store.create(
                leases,
                LEASE_NAMESPACE,
                {
                    "metadata": {
                        "name": name,
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Node",
                                "name": name,
                                "uid": meta(node).get("uid", ""),
                            }
                        ],
                    },
                    "spec": {
                        "holderIdentity": name,
                        "leaseDurationSeconds": LEASE_DURATION_S,
                        "renewTime": _micro(now),
                    },
                },
            )
            changes.append(f"{name}: kubelet created its Lease")
            continue
        renewed = str(spec_of(lease).get("renewTime") or "")
        try:
            last = datetime.fromisoformat(renewed.replace("Z", "+00:00"))
        except ValueError:
            last = now - timedelta(seconds=RENEW_INTERVAL_S)
        if (now - last).total_seconds() < RENEW_INTERVAL_S:
            continue
        store.patch(
            leases,
            LEASE_NAMESPACE,
            name,
            "application/merge-patch+json",
            {"spec": {"renewTime": _micro(now)}},
        )
    return changes
