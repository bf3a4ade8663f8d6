"""The catalogue of faults the simulated cluster can suffer: by name, with their parameters.

`inject(cluster, FAULT, NODE, now, **params)` makes a fault happen the way the real components
would show it (see `gpusim.gpu_faults`, `node_faults`, `workload_faults`, `upgrades`), or raises
`FaultError` having changed nothing. This module only looks faults up and checks their
parameters; it must never change the cluster itself.

GPU-level facts no Kubernetes object holds (the last Xid, ECC and NVLink counters, Fabric
Manager) live in `gpu_state(cluster)` (`gpusim.hardware`), for the dcgm-exporter style metrics
endpoint; the faults that Prometheus would alert on return Alertmanager webhook alerts in
`FaultResult.alerts`.

`repair(cluster, FAULT, NODE, now)` takes a fault away again, the way the components that mend
it would, until the node (its labels, conditions, capacity, operator pods and dcgm-exporter
series) is again the healthy node of its scenario. What no repair takes back, because no real
one does: history (restart counts, events, a new boot id, the aggregate ECC count and the
remapped rows a GPU keeps in its InfoROM) and the pods a fault evicted (their owners make new
ones). A repair never touches `spec.unschedulable`: a cordon is the operator's decision, and
the only one lifted is the one the GPU Operator's upgrade controller made itself, as that
controller does (never one that was there when the upgrade began).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime
from typing import Any

from gpusim import gpu_faults, node_faults, upgrades, workload_faults
from gpusim.faulting import FaultError, FaultResult, Target, cordon, get_node, uncordon
from gpusim.hardware import gpu_state
from gpusim.node_faults import enable_mig
from gpusim.resources import ApiError
from gpusim.state import ClusterState
from gpusim.upgrades import advance_upgrade

__all__ = [
    "FAULTS",
    "FaultError",
    "FaultResult",
    "advance_upgrade",
    "cordon",
    "enable_mig",
    "fault_parameters",
    "gpu_state",
    "inject",
    "repair",
    "uncordon",
]


_FAULTS: dict[str, Callable[..., FaultResult]] = {
    "zero-capacity": gpu_faults.zero_capacity,
    "plugin-crashloop": gpu_faults.plugin_crashloop,
    "xid": gpu_faults.xid,
    "ecc-dbe": gpu_faults.ecc_dbe,
    "nvlink": gpu_faults.nvlink,
    "fabric-manager-down": gpu_faults.fabric_manager_down,
    "reboot": node_faults.reboot,
    "mig-failed": node_faults.mig_failed,
    "driver-upgrade": upgrades.driver_upgrade,
    "driver-upgrade-failed": upgrades.driver_upgrade_failed,
    "pdb-block": workload_faults.pdb_block,
    "finalizer-stuck": workload_faults.finalizer_stuck,
    "not-ready": node_faults.not_ready,
}
_REPAIRS: dict[str, Callable[..., FaultResult]] = {
    "zero-capacity": gpu_faults.repair_zero_capacity,
    "plugin-crashloop": gpu_faults.repair_plugin_crashloop,
    "xid": gpu_faults.repair_xid,
    "ecc-dbe": gpu_faults.repair_ecc_dbe,
    "nvlink": gpu_faults.repair_nvlink,
    "fabric-manager-down": gpu_faults.repair_fabric_manager_down,
    "reboot": node_faults.repair_reboot,
    "mig-failed": node_faults.repair_mig_failed,
    "driver-upgrade": upgrades.repair_driver_upgrade,
    "driver-upgrade-failed": upgrades.repair_driver_upgrade_failed,
    "pdb-block": workload_faults.repair_pdb_block,
    "finalizer-stuck": workload_faults.repair_finalizer_stuck,
    "not-ready": node_faults.repair_not_ready,
}
"""Every fault has its repair (a test holds the two tables to the same names)."""
FAULTS = tuple(_FAULTS)


def fault_parameters(fault: str) -> dict[str, Any]:
    """The parameters a fault takes, with their defaults (`inspect.Parameter.empty`: required)."""
    handler = _FAULTS.get(fault)
    if handler is None:
        raise FaultError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    parameters = list(inspect.signature(handler).parameters.values())[1:]
    return {p.name: p.default for p in parameters}


def inject(store: ClusterState, fault: str, node: str, now: datetime, **params: Any) -> FaultResult:
    """Make `fault` happen on `node` at `now`. Raises FaultError, changing nothing, for an
    unknown fault, node or parameter."""
    return _run(_FAULTS, store, fault, node, now, params)


def repair(store: ClusterState, fault: str, node: str, now: datetime, **params: Any) -> FaultResult:
    """Take `fault` away from `node` at `now`, the way the components that mend it would (see
    the module docstring); a node that does not show it is left as it is and the result says
    so. Raises FaultError, changing nothing, for an unknown fault, node or parameter."""
    return _run(_REPAIRS, store, fault, node, now, params)


def _run(
    table: dict[str, Callable[..., FaultResult]],
    store: ClusterState,
    fault: str,
    node: str,
    now: datetime,
    params: dict[str, Any],
) -> FaultResult:
    handler = table.get(fault)
    if handler is None:
        raise FaultError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    try:
        node_obj = get_node(store, node)
    except ApiError as exc:
        raise FaultError(f'{fault}: node "{node}" not found') from exc
    try:
        inspect.signature(handler).bind(None, **params)
    except TypeError as exc:
        accepted = ", ".join(list(inspect.signature(handler).parameters)[1:]) or "none"
        raise FaultError(f"{fault}: {exc} (parameters: {accepted})") from exc
    return handler(Target(store, node_obj, now), **params)
