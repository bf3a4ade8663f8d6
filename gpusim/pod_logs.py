"""`GET pods/NAME/log`: what the kubelet answers, relayed by the API server.

The bot's evidence and `kubectl logs` read a pod's log, and the real kubelet refuses with a
400 a container that has not started (`validateContainerLogStatus`), naming why in the
kubelet's words; the simulator answers the same so that the refusal path is exercised too.
It must never invent a log for a container the simulated kubelet ran (those are kept by
`gpusim.kubelet`), nor write to the cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.kube_objects import name_of, namespace_of, spec_of, status_of
from gpusim import kubelet
from gpusim.objects import Json
from gpusim.resources import ApiError
from gpusim.state import ClusterState

_PULL_FAILURES = {
    "ErrImagePull": "image can't be pulled",
    "ImagePullBackOff": "trying and failing to pull image",
}
"""How the kubelet words the common waiting reasons when asked for a container's log."""


def pod_log(store: ClusterState, pod: Json, query: dict[str, str]) -> str:
    """`GET pods/NAME/log`: what the simulated kubelet kept of a container it ran (the
    `nvidia-smi -L` pods, see `kubelet.container_log`); for a pod on a node whose container
    has not started, the kubelet's 400 (`validateContainerLogStatus`); otherwise one generic
    line, for the pods the simulator only pretends to run."""
    spec, status = spec_of(pod), status_of(pod)
    name = name_of(pod)
    names = [str(c.get("name", "")) for c in spec.get("containers") or []]
    container = query.get("container") or (names[0] if names else "")
    if names and container not in names:
        raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    kept = kubelet.container_log(store, pod, container)
    if kept is not None:
        return kept
    if spec.get("nodeName"):
        current = next(
            (s for s in status.get("containerStatuses") or [] if s.get("name") == container),
            None,
        )
        if current is None and status.get("phase") in ("Succeeded", "Failed"):
            raise ApiError(
                400, "BadRequest", f'container "{container}" in pod "{name}" is not available'
            )
        state = (current or {}).get("state") or {}
        last = (current or {}).get("lastState") or {}
        if not state.get("running") and not state.get("terminated") and not last.get("terminated"):
            reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            reason = _PULL_FAILURES.get(reason, reason)
            raise ApiError(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: {reason}',
            )
    return f"{datetime.now(UTC).isoformat()} simulated log of {namespace_of(pod)}/{name}\n"
