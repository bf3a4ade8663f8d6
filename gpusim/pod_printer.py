"""The server-side printer of a pod: printPod of pkg/printers/internalversion/printers.go.

What a person sees of a pod in `kubectl get` (`CrashLoopBackOff`, `Init:0/1`, `Terminating`,
`3 (5m ago)`) is the server's doing, worked out from the container statuses in the order the
real printer reads them; it has a module of its own because it is the longest transcription
and shares nothing with the other kinds' printers but the cells. Pure: it must never read the
cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.kube_objects import meta, name_of, spec_of, status_of
from gpusim.objects import Json
from gpusim.table_cells import (
    AGE,
    NAME,
    Cell,
    Printer,
    column,
    condition_true,
    human_duration,
    parse_time,
    since,
)

_POD_COLUMNS = [
    NAME,
    column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    column("Status", "The aggregate status of the containers in this pod."),
    column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    AGE,
    column("IP", "podIP address allocated to the pod.", priority=1),
    column("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
    column("Nominated Node", "nominatedNodeName is set when this pod preempts.", priority=1),
    column("Readiness Gates", "If specified, all readiness gates will be evaluated.", priority=1),
]


def _restartable(container: Mapping[str, Any] | None) -> bool:
    return bool(container) and container.get("restartPolicy") == "Always"  # type: ignore[union-attr]


def _pod(pod: Json, now: datetime) -> list[Cell]:
    """printPod."""
    spec, status = spec_of(pod), status_of(pod)
    conditions = status.get("conditions") or []
    restarts = 0
    restartable_restarts = 0
    total = len(spec.get("containers") or [])
    ready = 0
    last_restart: datetime | None = None
    last_restartable: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {str(c.get("name")): c for c in spec.get("initContainers") or []}
    total += sum(1 for c in init_specs.values() if _restartable(c))
    init_statuses = status.get("initContainerStatuses") or []
    initializing = False

    def finished_at(container: Json) -> datetime | None:
        return parse_time(
            ((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        )

    for index, container in enumerate(init_statuses):
        restarts += int(container.get("restartCount") or 0)
        finished = finished_at(container)
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
        restartable = _restartable(init_specs.get(str(container.get("name"))))
        if restartable:
            restartable_restarts += int(container.get("restartCount") or 0)
            if finished and (last_restartable is None or finished > last_restartable):
                last_restartable = finished
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if restartable and container.get("started"):
            if container.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            if not terminated.get("reason"):
                if terminated.get("signal"):
                    reason = f"Init:Signal:{terminated['signal']}"
                else:
                    reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
            else:
                reason = "Init:" + str(terminated["reason"])
        elif waiting and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or condition_true(conditions, "Initialized"):
        restarts = restartable_restarts
        last_restart = last_restartable
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += int(container.get("restartCount") or 0)
            finished = finished_at(container)
            if finished and (last_restart is None or finished > last_restart):
                last_restart = finished
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated is not None:
                if terminated.get("signal"):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{terminated.get('exitCode', 0)}"
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if condition_true(conditions, "Ready") else "NotReady"
    deleting = bool(meta(pod).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    # Convert_v1_PodStatus_To_core_PodStatus: podIP is authoritative, and stands in for an
    # empty podIPs, before the printer reads PodIPs[0].
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        true = sum(
            1 for gate in gates if condition_true(conditions, str(gate.get("conditionType")))
        )
        gates_cell = f"{true}/{len(gates)}"
    return [
        name_of(pod),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        since(meta(pod).get("creationTimestamp"), now),
        str(status.get("podIP") or (ips[0].get("ip") if ips else "") or "<none>"),
        str(spec.get("nodeName") or "<none>"),
        str(status.get("nominatedNodeName") or "<none>"),
        gates_cell,
    ]


PRINTERS: dict[str, Printer] = {"Pod": (_POD_COLUMNS, _pod)}
