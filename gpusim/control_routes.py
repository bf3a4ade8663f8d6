"""The simulator's own control endpoints, `POST /_sim/faults` and `POST /_sim/repairs`: what
`gpubot sim inject` and `gpubot sim repair` (and `gpusim.launching`'s `inject_remote`,
`repair_remote`) call on a running simulator.

They are not Kubernetes: a fault is something that happens to the machines, so only the
simulator can make it happen, and a separate process needs a way in. They are non-resource
paths under RBAC like any other (cluster-admin may call them). The faults themselves are
`gpusim.faults`'; this module only reads the request and words the answer, and must never
decide what a fault does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gpusim import faults
from gpusim.objects import Json
from gpusim.resources import ApiError
from gpusim.state import ClusterState


def control(
    store: ClusterState, parts: list[str], method: str, body: Callable[[], Any]
) -> Json | None:
    """The answer of a control endpoint (`body()` reads the request's), None when the path
    and method are not one."""
    if parts == ["_sim", "faults"] and method == "POST":
        return _inject(store, body())
    if parts == ["_sim", "repairs"] and method == "POST":
        return _repair(store, body())
    return None


def _inject(store: ClusterState, body: Any) -> Json:
    """`POST /_sim/faults`: `gpubot sim inject`."""
    result = _fault_call(store, faults.inject, body)
    return {
        "fault": result.fault,
        "node": result.node,
        "description": result.description,
        "payload": result.payload(),
    }


def _repair(store: ClusterState, body: Any) -> Json:
    """`POST /_sim/repairs`, the same body as `/_sim/faults`: `gpubot sim repair`."""
    result = _fault_call(store, faults.repair, body)
    return {"fault": result.fault, "node": result.node, "description": result.description}


def _fault_call(
    store: ClusterState, call: Callable[..., faults.FaultResult], body: Any
) -> faults.FaultResult:
    if not isinstance(body, dict) or not body.get("fault") or not body.get("node"):
        raise ApiError(400, "BadRequest", 'expected {"fault": ..., "node": ..., "params": {...}}')
    params = body.get("params") or {}
    if not isinstance(params, dict):
        raise ApiError(400, "BadRequest", "params must be an object")
    try:
        return call(store, str(body["fault"]), str(body["node"]), datetime.now(UTC), **params)
    except faults.FaultError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from exc
