"""Faults of the GPU stack on one node, as the NVIDIA components show them.

The device plugin (a GPU leaves `nvidia.com/gpu` allocatable on a critical Xid, not on 13, 31,
43, 45, 68, 109; a crash-looping plugin leaves its devices unhealthy: allocatable 0 at once,
capacity 0 once the kubelet's 5-minute endpoint grace period is over), DCGM (the last Xid, ECC
and NVLink counters) and nvidia-fabricmanager. Each fault changes what those components would
change and must never change anything else (no cordon, no taint: those are people's and other
components' business); the alerts it returns are those Prometheus would fire.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bot.kube_objects import (
    name_of,
    pod_ready,
    quantity,
    status_of,
)
from gpusim.faulting import (
    FaultError,
    FaultResult,
    Target,
    alert,
    allocatable_gpus,
    get_node,
    make_crashloop,
    mark_gpu_unhealthy,
    nothing_to_repair,
    operator_pod,
    register_devices,
    replace_operator_pod,
    require_gpu_index,
    require_gpu_node,
    require_int,
    set_allocatable,
    start_containers,
)
from gpusim.hardware import (
    XID_DOUBLE_BIT_ECC,
    XID_FELL_OFF_BUS,
    XIDS_KEEPING_GPU_HEALTHY,
    gpu_count,
    gpu_record,
    gpu_state,
    reset_gpu,
)
from gpusim.node_faults import reboot
from gpusim.objects import (
    DCGM_EXPORTER_APP,
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


# ---- repairs ---------------------------------------------------------------------------------
#
# A GPU comes back from an Xid, a double-bit ECC error or NVLink errors with a GPU reset
# (nvidia-smi --gpu-reset, the Xid catalogue's "reset GPU"): its volatile counters start over
# and the device plugin's health check passes again, so it returns to allocatable. The reset
# needs the GPU idle; the simulator does not model the processes on it. A GPU that fell off
# the bus (Xid 79) cannot be reset: only a reboot brings it back ("Reboot the system to
# recover this GPU"), and the repair reboots the node.
#
# `DCGM_FI_DEV_XID_ERRORS` is the last Xid DCGM recorded, not a current fault: it does not go
# back to 0 when the GPU recovers (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#277). A repair that
# must show a clean gauge restarts the node's dcgm-exporter (its embedded DCGM starts with no
# history), the workaround those reports give; without it the gauge would keep the code. The
# aggregate ECC count and the remapped rows live in the GPU's InfoROM and never go back.


def _gpus_where(t: Target, test: Callable[[dict[str, Any]], bool]) -> list[int]:
    records = gpu_state(t.store).get(t.name, {})
    return sorted(index for index, record in records.items() if test(record))


def _reset_gpus(t: Target, indices: list[int]) -> list[str]:
    for index in indices:
        reset_gpu(gpu_record(t.store, t.name, index))
    listed = ", ".join(str(i) for i in indices)
    return [f"{t.name}: GPU {listed} reset (nvidia-smi --gpu-reset): volatile counters at 0"]


def _restart_exporter(t: Target) -> list[str]:
    """A new DCGM: every GPU of the node reads no Xid; the exporter's Xid window starts over
    with its new pod (see `metrics.observe_xids`)."""
    for record in gpu_state(t.store).get(t.name, {}).values():
        record["xid"] = 0
    if operator_pod(t.store, t.name, DCGM_EXPORTER_APP) is None:
        return [f"{t.name}: DCGM restarted: DCGM_FI_DEV_XID_ERRORS back to 0"]
    old, new = replace_operator_pod(t.store, t.name, DCGM_EXPORTER_APP, t.now)
    return [
        f"{t.name}: {name_of(old)} deleted, {name_of(new)} started: a new DCGM, "
        "DCGM_FI_DEV_XID_ERRORS back to 0 (it never resets by itself)"
    ]


def repair_zero_capacity(t: Target) -> FaultResult:
    unhealthy = _gpus_where(t, lambda r: not r["healthy"])
    if not unhealthy and allocatable_gpus(t.node) >= gpu_count(t.node):
        return nothing_to_repair("zero-capacity", t.name, "every GPU is allocatable")
    for index in unhealthy:
        gpu_record(t.store, t.name, index)["healthy"] = True
    lines = [f"{t.name}: device plugin's health check passes for every GPU"]
    lines += register_devices(t.store, get_node(t.store, t.name))
    return FaultResult("zero-capacity", t.name, lines)


def repair_plugin_crashloop(t: Target) -> FaultResult:
    pod = operator_pod(t.store, t.name, DEVICE_PLUGIN_APP)
    if pod is None:
        return nothing_to_repair("plugin-crashloop", t.name, f"no {DEVICE_PLUGIN_APP} pod")
    lines: list[str] = []
    if not pod_ready(pod):
        start_containers(t.store, pod, t.now)
        lines.append(f"{t.name}: {name_of(pod)} starts and stays up (CrashLoopBackOff over)")
    lines += register_devices(t.store, get_node(t.store, t.name))
    if not lines:
        return nothing_to_repair("plugin-crashloop", t.name, "the device plugin runs")
    return FaultResult("plugin-crashloop", t.name, lines)


def _repair_after_xid(t: Target, fault: str, test: Callable[[dict[str, Any]], bool]) -> FaultResult:
    struck = _gpus_where(t, test)
    if not struck:
        return nothing_to_repair(fault, t.name, f"no GPU shows {fault}")
    lost = _gpus_where(t, lambda r: r["xid"] == XID_FELL_OFF_BUS)
    if lost:
        rebooted = reboot(t, reapply_mig=True)
        return FaultResult(
            fault, t.name, [f"{t.name}: GPU {lost[0]} is lost: reboot", *rebooted.description]
        )
    lines = _reset_gpus(t, struck)
    lines += register_devices(t.store, get_node(t.store, t.name))
    lines += _restart_exporter(t)
    return FaultResult(fault, t.name, lines)


def repair_xid(t: Target) -> FaultResult:
    return _repair_after_xid(t, "xid", lambda r: bool(r["xid"]) or not r["healthy"])


def repair_ecc_dbe(t: Target) -> FaultResult:
    return _repair_after_xid(
        t, "ecc-dbe", lambda r: r["ecc_dbe_volatile"] > 0 or r["xid"] == XID_DOUBLE_BIT_ECC
    )


def repair_nvlink(t: Target) -> FaultResult:
    struck = _gpus_where(
        t,
        lambda r: any(
            r.get(k, 0)
            for k in ("nvlink_crc_flit_errors", "nvlink_replay_errors", "nvlink_recovery_errors")
        ),
    )
    if not struck:
        return nothing_to_repair("nvlink", t.name, "no NVLink errors counted")
    lines = _reset_gpus(t, struck)
    lines.append(f"{t.name}: NVLinks retrained; Prometheus sees the counters reset")
    return FaultResult("nvlink", t.name, lines)


def repair_fabric_manager_down(t: Target) -> FaultResult:
    down = _gpus_where(t, lambda r: r["fabric_manager"] == "down")
    if not down:
        return nothing_to_repair("fabric-manager-down", t.name, "nvidia-fabricmanager runs")
    for index in down:
        gpu_record(t.store, t.name, index)["fabric_manager"] = "running"
    return FaultResult(
        "fabric-manager-down", t.name, [f"{t.name}: systemctl start nvidia-fabricmanager"]
    )
