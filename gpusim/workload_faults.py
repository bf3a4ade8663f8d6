"""Faults of the workloads on a node that stand in a drain's way: a PodDisruptionBudget that
allows no disruption, and a finalizer nothing removes. They change the budget or the pod, as a
person or a controller would, and never the node itself.
"""

from __future__ import annotations

from bot.kube.objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    pod_finished,
    pod_requests,
    selector_matches,
    spec_of,
    status_of,
)
from gpusim.faulting import (
    FaultError,
    FaultResult,
    Target,
    is_daemonset_pod,
    is_mirror_pod,
    patch_object,
    pods_on,
)
from gpusim.objects import (
    GPU_RESOURCE,
    Json,
    ts,
)
from gpusim.resources import BY_KIND


def pdb_block(t: Target) -> FaultResult:
    pods = [
        p
        for p in pods_on(t.store, t.name)
        if not is_daemonset_pod(p) and not is_mirror_pod(p) and not pod_finished(p)
    ]
    pdbs: dict[tuple[str, str], Json] = {}
    for pod in pods:
        budgets, _ = t.store.list(BY_KIND["PodDisruptionBudget"], namespace_of(pod))
        for pdb in budgets:
            if selector_matches(spec_of(pdb).get("selector"), labels_of(pod)):
                pdbs[(namespace_of(pdb), name_of(pdb))] = pdb
    if not pdbs:
        raise FaultError(f'pdb-block: no PodDisruptionBudget covers a pod on node "{t.name}"')
    lines = []
    for (namespace, name), pdb in sorted(pdbs.items()):
        healthy = int(status_of(pdb).get("currentHealthy") or 0)
        generation = int(meta(pdb).get("generation") or 1) + 1
        patch_object(
            t.store,
            "PodDisruptionBudget",
            namespace,
            name,
            {
                "metadata": {"generation": generation},
                "spec": {"minAvailable": healthy, "maxUnavailable": None},
                "status": {
                    "observedGeneration": generation,
                    "desiredHealthy": healthy,
                    "disruptionsAllowed": 0,
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "False",
                            "reason": "InsufficientPods",
                            "message": "",
                            "lastTransitionTime": ts(t.now),
                            "observedGeneration": generation,
                        }
                    ],
                },
            },
        )
        lines.append(
            f"{namespace}/{name}: minAvailable={healthy} of {healthy} healthy, disruptionsAllowed=0"
        )
    return FaultResult("pdb-block", t.name, lines)


def finalizer_stuck(
    t: Target, pod: str | None = None, finalizer: str = "example.com/checkpoint-upload"
) -> FaultResult:
    if not isinstance(finalizer, str) or "/" not in finalizer:
        raise FaultError(
            f"finalizer-stuck: finalizer must look like domain/name, not {finalizer!r}"
        )
    candidates = [
        p
        for p in pods_on(t.store, t.name)
        if not is_daemonset_pod(p)
        and not is_mirror_pod(p)
        and not pod_finished(p)
        and not meta(p).get("deletionTimestamp")
        and (pod is None or name_of(p) == pod)
    ]
    if not candidates:
        what = f'pod "{pod}" not found' if pod else "no pod outside DaemonSets"
        raise FaultError(f'finalizer-stuck: {what} on node "{t.name}"')
    # GPU workers first: the pods whose stuck deletion hurts a drain most.
    chosen = sorted(
        candidates,
        key=lambda p: (-pod_requests(p).get(GPU_RESOURCE, 0), namespace_of(p), name_of(p)),
    )[0]
    finalizers = [*(meta(chosen).get("finalizers") or []), finalizer]
    patch_object(
        t.store,
        "Pod",
        namespace_of(chosen),
        name_of(chosen),
        {"metadata": {"finalizers": list(dict.fromkeys(finalizers))}},
    )
    return FaultResult(
        "finalizer-stuck",
        t.name,
        [
            f"{namespace_of(chosen)}/{name_of(chosen)}: finalizer {finalizer} that nothing "
            "removes (a delete leaves the pod Terminating)"
        ],
    )
