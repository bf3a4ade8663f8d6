"""Faults of the workloads on a node that stand in a drain's way: a PodDisruptionBudget that
allows no disruption, and a finalizer nothing removes. They change the budget or the pod, as a
person or a controller would, and never the node itself.
"""

from __future__ import annotations

from bot.kube_objects import (
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
    nothing_to_repair,
    patch_object,
    pods_on,
)
from gpusim.hardware import hardware
from gpusim.objects import (
    GPU_RESOURCE,
    Json,
    ts,
)
from gpusim.patching import MERGE_PATCH
from gpusim.resources import BY_KIND, ApiError

_ANY_NODE_BUDGETS = ("", "pdb-block")
"""Where a budget's spec from before any pdb-block is kept: budgets span nodes, and the first
block of a budget must be what every repair of it goes back to."""


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
    originals = hardware(t.store).taken.setdefault(_ANY_NODE_BUDGETS, {})
    blocked = hardware(t.store).taken.setdefault((t.name, "pdb-block"), {"budgets": []})
    for (namespace, name), pdb in sorted(pdbs.items()):
        spec = spec_of(pdb)
        originals.setdefault(
            f"{namespace}/{name}",
            {k: spec[k] for k in ("minAvailable", "maxUnavailable") if k in spec},
        )
        if [namespace, name] not in blocked["budgets"]:
            blocked["budgets"].append([namespace, name])
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
    stuck = hardware(t.store).taken.setdefault((t.name, "finalizer-stuck"), {"pods": []})
    stuck["pods"].append([namespace_of(chosen), name_of(chosen), finalizer])
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


# ---- repairs ---------------------------------------------------------------------------------


def repair_pdb_block(t: Target) -> FaultResult:
    """The budgets the fault tightened get their own spec back (as the person who wrote them
    would re-apply it; a new generation), and the disruption controller's condition follows.
    Budgets nobody blocked through the simulator are left as they are: their intent is
    unknown."""
    taken = hardware(t.store).taken
    blocked = taken.pop((t.name, "pdb-block"), {}).get("budgets") or []
    originals = taken.get(_ANY_NODE_BUDGETS, {})
    lines = []
    for namespace, name in blocked:
        original = originals.pop(f"{namespace}/{name}", None)
        if original is None:
            continue
        try:
            pdb = t.store.get(BY_KIND["PodDisruptionBudget"], namespace, name)
        except ApiError:
            continue
        generation = int(meta(pdb).get("generation") or 1) + 1
        spec = {"minAvailable": None, "maxUnavailable": None, **original}
        patch_object(
            t.store,
            "PodDisruptionBudget",
            namespace,
            name,
            {"metadata": {"generation": generation}, "spec": spec},
        )
        allowed = t.store.get(BY_KIND["PodDisruptionBudget"], namespace, name)["status"]
        can = allowed["disruptionsAllowed"] > 0
        patch_object(
            t.store,
            "PodDisruptionBudget",
            namespace,
            name,
            {
                "status": {
                    "observedGeneration": generation,
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "True" if can else "False",
                            "reason": "SufficientPods" if can else "InsufficientPods",
                            "message": "",
                            "lastTransitionTime": ts(t.now),
                            "observedGeneration": generation,
                        }
                    ],
                }
            },
        )
        shown = ", ".join(f"{k}={v}" for k, v in sorted(original.items()))
        lines.append(
            f"{namespace}/{name}: {shown} again, disruptionsAllowed={allowed['disruptionsAllowed']}"
        )
    if not lines:
        return nothing_to_repair("pdb-block", t.name, "no budget blocked by the simulator")
    return FaultResult("pdb-block", t.name, lines)


def repair_finalizer_stuck(t: Target) -> FaultResult:
    """The controller behind each finalizer the fault added finishes its work and removes it;
    a pod already Terminating then goes, as the API server deletes it."""
    stuck = hardware(t.store).taken.pop((t.name, "finalizer-stuck"), {}).get("pods") or []
    lines = []
    for namespace, name, finalizer in stuck:
        try:
            pod = t.store.get(BY_KIND["Pod"], namespace, name)
        except ApiError:
            continue
        finalizers = [f for f in meta(pod).get("finalizers") or [] if f != finalizer]
        t.store.patch(
            BY_KIND["Pod"],
            namespace,
            name,
            MERGE_PATCH,
            {"metadata": {"finalizers": finalizers or None}},
        )
        gone = " (the pod was Terminating: deleted)" if meta(pod).get("deletionTimestamp") else ""
        lines.append(f"{namespace}/{name}: finalizer {finalizer} removed{gone}")
    if not lines:
        return nothing_to_repair("finalizer-stuck", t.name, "no finalizer added by the simulator")
    return FaultResult("finalizer-stuck", t.name, lines)
