"""The machines behind the simulated nodes: what no Kubernetes object records.

Per GPU, what DCGM and NVML would report and what the device plugin concluded (last Xid, ECC
and NVLink counters, remapped rows, health, Fabric Manager); per node, the driver version an
operator upgrade is installing; and what a fault took away that its repair gives back (a
budget's spec, a MIG layout, the driver pod from before an upgrade). All of it is kept per
`ClusterState`, beside it and never in it: the API must not show what a real API server does
not hold. This module holds and reads; it must never write to the cluster.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from bot.kube_objects import labels_of, quantity, status_of
from gpusim.objects import GPU_RESOURCE, Json
from gpusim.state import ClusterState

XID_DOUBLE_BIT_ECC = 48
XID_ROW_REMAP_FAILURE = 64
XID_FELL_OFF_BUS = 79
XIDS_KEEPING_GPU_HEALTHY = frozenset({13, 31, 43, 45, 68, 109})
"""Xids the device plugin (`internal/rm/health.go`) ignores; any other marks the GPU unhealthy."""

HEALTHY_GPU: dict[str, Any] = {
    "xid": 0,
    "healthy": True,
    "ecc_dbe_volatile": 0,
    "ecc_dbe_aggregate": 0,
    "uncorrectable_remapped_rows": 0,
    "nvlink_crc_flit_errors": 0,
    "nvlink_replay_errors": 0,
    "nvlink_recovery_errors": 0,
    "fabric_manager": "running",
}
"""A GPU record as a fault first finds it: what DCGM reports for a GPU with no history."""

RESET_BY_DRIVER_RELOAD = (
    "ecc_dbe_volatile",
    "nvlink_crc_flit_errors",
    "nvlink_replay_errors",
    "nvlink_recovery_errors",
)
"""Counters NVML keeps since the driver last initialised the GPU (volatile ECC counts, NVLink
error counters): a GPU reset or a reboot sets them back to 0. The aggregate ECC counts and the
remapped rows live in the GPU's InfoROM and never go back."""


@dataclass
class Hardware:
    """One simulated cluster's machines, as far as the simulator models them."""

    gpus: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    """node -> GPU index -> record (fields of HEALTHY_GPU); only GPUs a fault touched."""
    upgrade_targets: dict[str, str] = field(default_factory=dict)
    """node -> driver version an upgrade in progress installs."""
    taken: dict[tuple[str, str], Json] = field(default_factory=dict)
    """(node, fault) -> what the fault took away that its repair gives back."""


_HARDWARE: weakref.WeakKeyDictionary[ClusterState, Hardware] = weakref.WeakKeyDictionary()
_HARDWARE_LOCK = threading.Lock()


def hardware(cluster: ClusterState) -> Hardware:
    with _HARDWARE_LOCK:
        found = _HARDWARE.get(cluster)
        if found is None:
            found = _HARDWARE[cluster] = Hardware()
        return found


def gpu_state(cluster: ClusterState) -> dict[str, dict[int, dict[str, Any]]]:
    """node -> GPU index -> what DCGM would report for it; only GPUs a fault touched.

    Fields: `xid` (last Xid, the `DCGM_FI_DEV_XID_ERRORS` gauge; 0 = none), `healthy` (the
    device plugin's view), `ecc_dbe_volatile` / `ecc_dbe_aggregate`,
    `uncorrectable_remapped_rows`, `nvlink_crc_flit_errors` / `nvlink_replay_errors` /
    `nvlink_recovery_errors`, `fabric_manager` ("running" | "down").
    """
    return hardware(cluster).gpus


def gpu_record(cluster: ClusterState, node: str, index: int) -> dict[str, Any]:
    """The record of GPU `index` of `node`, created healthy on first use."""
    return gpu_state(cluster).setdefault(node, {}).setdefault(index, dict(HEALTHY_GPU))


def gpu_count(node: Json) -> int:
    """GPUs of a node: GPU Feature Discovery's `nvidia.com/gpu.count` label, else the
    `nvidia.com/gpu` capacity (0: not a GPU node, or one whose stack never came up)."""
    label = labels_of(node).get("nvidia.com/gpu.count", "")
    if label.isdigit():
        return int(label)
    return quantity((status_of(node).get("capacity") or {}).get(GPU_RESOURCE, 0))


def remember(cluster: ClusterState, node: str, fault: str, taken: Json) -> None:
    """Keep what `fault` took away on `node`, for its repair; the first record of an episode
    wins (a fault injected twice must not overwrite what the node was like before)."""
    hardware(cluster).taken.setdefault((node, fault), taken)


def recall(cluster: ClusterState, node: str, fault: str) -> Json:
    """What `fault` took away on `node` ({} when nothing was kept)."""
    return hardware(cluster).taken.get((node, fault), {})


def forget(cluster: ClusterState, node: str, fault: str) -> None:
    hardware(cluster).taken.pop((node, fault), None)


def reset_gpu(record: dict[str, Any]) -> None:
    """What a GPU reset (or the driver loading again at boot) does to a GPU's record: the
    volatile counters start over and the device plugin finds it healthy. The last Xid is
    DCGM's memory, not the GPU's: only a new DCGM forgets it."""
    for key in RESET_BY_DRIVER_RELOAD:
        record[key] = 0
    record["healthy"] = True
