"""One node of a simulated cluster as a reader sees it, for "is it healthy again?" tests.

`node_view` reads, with the real kubectl, the node, the pods bound to it and the budgets, and
`series_of`, from the node's dcgm-exporter, its series; `normalized` drops what only records
when or how often something happened, so that a node before a fault and the same node after
its repair compare equal exactly when the repair gave everything back:

- timestamps (`TIME_KEYS`, and GPU Feature Discovery's `nvidia.com/gfd.timestamp` label);
- versions and identities a write or a restart necessarily renews: `resourceVersion`, `uid`,
  `generation` / `observedGeneration`, a pod's generated name (read as its `generateName`),
  a container's `containerID`, the node's `bootID` (a reboot's new boot id);
- restart history: a container's `restartCount` and `lastState` (the kubelet only counts up);
- in the series, the counters a GPU keeps for life in its InfoROM (`LIFETIME`: aggregate ECC
  counts, remapped rows) may be higher than before, never lower; the test says by how much.

Nothing else is forgiven: labels, annotations, taints, `spec.unschedulable`, capacity,
allocatable, conditions, pod phases, readiness, images and every other series value must be
what they were.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.kubectl import Kubectl

Json = dict[str, Any]

TIME_KEYS = frozenset(
    {
        "creationTimestamp",
        "lastHeartbeatTime",
        "lastTransitionTime",
        "lastProbeTime",
        "startTime",
        "startedAt",
        "finishedAt",
        "timeAdded",
    }
)
RENEWED_KEYS = frozenset(
    {"resourceVersion", "uid", "generation", "observedGeneration", "containerID", "bootID"}
)
HISTORY_KEYS = frozenset({"restartCount", "lastState"})
TIME_LABELS = frozenset({"nvidia.com/gfd.timestamp"})
LIFETIME = frozenset(
    {
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    }
)
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def normalized(value: Any) -> Any:
    """`value` without what only records time, identity or restart history (see above)."""
    if isinstance(value, list):
        return [normalized(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: Json = {}
    for key, item in value.items():
        if key in TIME_KEYS or key in RENEWED_KEYS or key in HISTORY_KEYS:
            continue
        if key == "labels" and isinstance(item, dict):
            item = {k: v for k, v in item.items() if k not in TIME_LABELS}
        out[key] = normalized(item)
    metadata = out.get("metadata")
    if isinstance(metadata, dict) and metadata.get("generateName"):
        metadata["name"] = metadata["generateName"] + "*"
    return out


def _json(kubectl: Kubectl, *args: str) -> Json:
    done = kubectl(*args, "-o", "json")
    assert done.returncode == 0, done.stderr
    loaded: Json = json.loads(done.stdout)
    return loaded


def node_view(kubectl: Kubectl, node: str) -> Json:
    """The node, its pods (by namespace and generated name) and the cluster's budgets (a
    budget spans nodes), as kubectl prints them, normalized. A budget's counts (expectedPods,
    currentHealthy, desiredHealthy, disruptionsAllowed) are left out: the server recomputes
    them from the pods on every read, and the pods are compared themselves. `names` maps each
    pod's own name to its key, for the test to find a pod by name; it is not part of the
    comparison."""
    pods = _json(kubectl, "get", "pods", "-A", "--field-selector", f"spec.nodeName={node}")
    budgets = _json(kubectl, "get", "pdb", "-A")["items"]
    return {
        "node": normalized(_json(kubectl, "get", "node", node)),
        "pods": {
            f"{p['metadata']['namespace']}/{normalized(p)['metadata']['name']}": normalized(p)
            for p in pods["items"]
        },
        "budgets": {
            f"{b['metadata']['namespace']}/{b['metadata']['name']}": _budget(b) for b in budgets
        },
        "names": {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": (
                f"{p['metadata']['namespace']}/{normalized(p)['metadata']['name']}"
            )
            for p in pods["items"]
        },
    }


_COUNTS = ("expectedPods", "currentHealthy", "desiredHealthy", "disruptionsAllowed")


def _budget(pdb: Json) -> Json:
    shown: Json = normalized(pdb)
    shown["status"] = {k: v for k, v in shown.get("status", {}).items() if k not in _COUNTS}
    return shown


def series_of(exporter_url: str, node: str) -> Series:
    """Every sample the node's dcgm-exporter serves: (name, labels) -> value."""
    with urllib.request.urlopen(f"{exporter_url}/metrics/{node}", timeout=10) as response:
        text = response.read().decode()
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # prometheus_client's parser adds `_total` to counters dcgm-exporter names bare.
            name = sample.name.removesuffix("_total") if family.type == "counter" else sample.name
            found[(name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def series_changes(before: Series, after: Series) -> dict[str, Any]:
    """What differs between two scrapes of one node, lifetime counters aside unless they went
    down: {"missing": [...], "new": [...], "changed": {...}, "lifetime": {...}}."""
    changes: dict[str, Any] = {
        "missing": sorted(str(k) for k in before.keys() - after.keys()),
        "new": sorted(str(k) for k in after.keys() - before.keys()),
        "changed": {},
        "lifetime": {},
    }
    for key in before.keys() & after.keys():
        if before[key] == after[key]:
            continue
        if key[0] in LIFETIME and after[key] > before[key]:
            changes["lifetime"][key] = after[key] - before[key]
        else:
            changes["changed"][str(key)] = (before[key], after[key])
    return changes
