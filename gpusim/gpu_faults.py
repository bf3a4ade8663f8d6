"""Faults of the GPU stack on one node, as the NVIDIA components show them.

The device plugin (a GPU leaves `nvidia.com/gpu` allocatable on a critical Xid, not on 13, 31,
43, 45, 68, 109; a crash-looping plugin leaves its devices unhealthy: allocatable 0 at once,
capacity 0 once the kubelet's 5-minute endpoint grace period is over), DCGM (the last Xid, ECC
and NVLink counters) and nvidia-fabricmanager. Each fault changes what those components would
change and must never change anything else (no cordon, no taint: those are people's and other
components' business); the alerts it returns are those Prometheus would fire.
"""

from __future__ import annotations

from datetime import timedelta

from bot.kube.objects import (
    name_of,
    quantity,
    status_of,
)
from gpusim.faulting import (
    FaultError,
    FaultResult,
    Target,
    alert,
    allocatable_gpus,
    make_crashloop,
    mark_gpu_unhealthy,
    operator_pod,
    require_gpu_index,
    require_gpu_node,
    require_int,
    set_allocatable,
)
from gpusim.hardware import (
    XIDS_KEEPING_GPU_HEALTHY,
    gpu_count,
    gpu_record,
)
from gpusim.objects import (
    DEVICE_PLUGIN_APP,
    GPU_OPERATOR_NS,
    GPU_RESOURCE,
)

_PLUGIN_STOP_GRACE = timedelta(minutes=5)
"""kubelet devicemanager `endpointStopGracePeriod`."""


def zero_capacity(t: Target) -> FaultResult:
    count = require_gpu_node(t.node, "zero-capacity")
    before = allocatable_gpus(t.node)
    for index in range(count):
        gpu_record(t.store, t.name, index)["healthy"] = False
    set_allocatable(t.store, t.name, 0)
    capacity = quantity((status_of(t.node).get("capacity") or {}).get(GPU_RESOURCE))
    return FaultResult(
        "zero-capacity",
        t.name,
        [
            f"{t.name}: device plugin reports every GPU unhealthy, allocatable {GPU_RESOURCE} "
            f"{before} -> 0 (capacity stays {capacity})"
        ],
    )


def plugin_crashloop(t: Target, restarts: int = 7) -> FaultResult:
    require_gpu_node(t.node, "plugin-crashloop")
    restarts = require_int("plugin-crashloop", "restarts", restarts, 1)
    pod = operator_pod(t.store, t.name, DEVICE_PLUGIN_APP)
    if pod is None:
        raise FaultError(f'plugin-crashloop: no {DEVICE_PLUGIN_APP} pod on node "{t.name}"')
    _, began = make_crashloop(t.store, pod, restarts, t.now, t.node)
    capacity = quantity((status_of(t.node).get("capacity") or {}).get(GPU_RESOURCE))
    # The plugin's endpoint stopped: its devices are unhealthy (allocatable 0); past the
    # kubelet's 5-minute grace period the resource is removed, which sets capacity to 0.
    capacity_after = 0 if t.now - began > _PLUGIN_STOP_GRACE else capacity
    set_allocatable(t.store, t.name, 0, capacity_after)
    for index in range(gpu_count(t.node)):
        gpu_record(t.store, t.name, index)
    return FaultResult(
        "plugin-crashloop",
        t.name,
        [
            f"{t.name}: pod {GPU_OPERATOR_NS}/{name_of(pod)} in CrashLoopBackOff, "
            f"{restarts} restarts, last exit code 1",
            f"{t.name}: allocatable {GPU_RESOURCE} 0, capacity {capacity} -> {capacity_after}",
        ],
    )


def xid(t: Target, code: int, gpu: int = 0) -> FaultResult:
    code = require_int("xid", "code", code, 1)
    gpu = require_gpu_index(t.node, "xid", gpu)
    state = gpu_record(t.store, t.name, gpu)
    state["xid"] = code
    lines = [f"{t.name}: GPU {gpu} reported Xid {code} (DCGM_FI_DEV_XID_ERRORS={code})"]
    if code not in XIDS_KEEPING_GPU_HEALTHY:
        changed = mark_gpu_unhealthy(t.store, t.name, gpu)
        if changed:
            lines.append(changed)
    fired = alert(
        "GPUXidError",
        t.name,
        t.now,
        "warning" if code in XIDS_KEEPING_GPU_HEALTHY else "critical",
        f"Xid {code} on {t.name} GPU {gpu}",
        f"DCGM_FI_DEV_XID_ERRORS is {code} on GPU {gpu} of {t.name}",
        gpu=str(gpu),
        xid=str(code),
    )
    return FaultResult("xid", t.name, lines, [fired])


def ecc_dbe(t: Target, gpu: int = 0) -> FaultResult:
    gpu = require_gpu_index(t.node, "ecc-dbe", gpu)
    state = gpu_record(t.store, t.name, gpu)
    state["ecc_dbe_volatile"] += 1
    state["ecc_dbe_aggregate"] += 1
    state["uncorrectable_remapped_rows"] += 1
    state["xid"] = 48  # the driver logs a double-bit error as Xid 48
    lines = [
        f"{t.name}: GPU {gpu} double-bit ECC error (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL="
        f"{state['ecc_dbe_volatile']}), Xid 48"
    ]
    changed = mark_gpu_unhealthy(t.store, t.name, gpu)
    if changed:
        lines.append(changed)
    alerts = [
        alert(
            "GPUECCDoubleBitError",
            t.name,
            t.now,
            "critical",
            f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL increased on {t.name} GPU {gpu}",
            f"Uncorrectable (double-bit) ECC errors on GPU {gpu} of {t.name}",
            gpu=str(gpu),
        ),
        alert(
            "GPUXidError",
            t.name,
            t.now,
            "critical",
            f"Xid 48 on {t.name} GPU {gpu}",
            f"DCGM_FI_DEV_XID_ERRORS is 48 on GPU {gpu} of {t.name}",
            gpu=str(gpu),
            xid="48",
        ),
    ]
    return FaultResult("ecc-dbe", t.name, lines, alerts)


def nvlink(t: Target, gpu: int = 0, link: int = 0, errors: int = 250) -> FaultResult:
    gpu = require_gpu_index(t.node, "nvlink", gpu)
    link = require_int("nvlink", "link", link, 0)
    errors = require_int("nvlink", "errors", errors, 1)
    state = gpu_record(t.store, t.name, gpu)
    state["nvlink_crc_flit_errors"] += errors
    state["nvlink_replay_errors"] += max(1, errors // 10)
    fired = alert(
        "GPUNVLinkErrors",
        t.name,
        t.now,
        "warning",
        f"NVLink CRC errors rising on {t.name} GPU {gpu} link {link}",
        f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL increased by {errors} on GPU {gpu}",
        gpu=str(gpu),
        link=str(link),
    )
    return FaultResult(
        "nvlink",
        t.name,
        [f"{t.name}: GPU {gpu} NVLink {link}: {errors} CRC flit errors"],
        [fired],
    )


def fabric_manager_down(t: Target) -> FaultResult:
    count = require_gpu_node(t.node, "fabric-manager-down")
    for index in range(count):
        gpu_record(t.store, t.name, index)["fabric_manager"] = "down"
    fired = alert(
        "GPUFabricManagerDown",
        t.name,
        t.now,
        "critical",
        "nvidia-fabricmanager not running",
        f"NVIDIA Fabric Manager is not running on {t.name}: CUDA cannot use the NVSwitch fabric",
    )
    return FaultResult(
        "fabric-manager-down",
        t.name,
        [f"{t.name}: nvidia-fabricmanager.service stopped"],
        [fired],
    )
