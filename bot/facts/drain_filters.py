"""kubectl drain's pod filters, the one definition: what a drain does with each pod of its node
(evicts it, waits for it to go, leaves it) and what refuses the drain, with the flag that gets
past it.

Why it exists: the drain proposal says what blocks it before anyone approves
(`bot.facts.pods.drain_blockers`) and the executor's drain does it (`bot.acting.draining`);
with two readings of kubectl's rules, the message could promise a drain the executor then
refuses, or stay silent about a refusal. Both ask this module.

The order and the words are kubectl's (k8s.io/kubectl/pkg/drain/filters.go: daemonSet,
mirror, localStorage, unreplicated); a pod already terminating is waited for, never evicted a
second time. Unlike kubectl, which stops at a pod's first refusal, every refusal of a pod is
given: a pod with emptyDir data and no controller needs both flags, and the on-call should
read both at once.

What it must never do: read the API (the caller says whether a DaemonSet exists), or allow a
pod that kubectl would refuse under the same flags.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.kube_objects import Obj, controller_of, meta, name_of, namespace_of, pod_finished, spec_of

PodAction = Literal["evict", "wait", "skip"]
RefusalKind = Literal["daemonset", "daemonset-missing", "emptydir", "no-controller"]


@dataclass(frozen=True)
class DrainFlags:
    """kubectl drain's flags that change what is refused. gpubot's drains always ignore
    DaemonSets (their pods stay, as `kubectl drain --ignore-daemonsets` leaves them)."""

    ignore_daemonsets: bool = True
    delete_emptydir_data: bool = False
    allow_unmanaged: bool = False
    """kubectl's `--force`: pods without a controller, or whose DaemonSet is gone, may go."""


@dataclass(frozen=True)
class Refused:
    """Why kubectl would refuse to drain because of this pod, and the flag that would let it."""

    kind: RefusalKind
    message: str
    flag: str


@dataclass(frozen=True)
class Disposition:
    """What a drain does with one pod: `action`, or refusals (then `action` is None)."""

    action: PodAction | None
    reason: str
    refusals: tuple[Refused, ...] = ()


def disposition(
    pod: Obj, flags: DrainFlags, daemonset_exists: Callable[[str, str], bool]
) -> Disposition:
    """`daemonset_exists(namespace, name)`: asked only of a pod a DaemonSet controls."""
    ns, name = namespace_of(pod), name_of(pod)
    controller = controller_of(pod)
    finished = pod_finished(pod)
    if controller and controller[0] == "DaemonSet":
        if not daemonset_exists(ns, controller[1]):
            if not flags.allow_unmanaged:
                message = f"pod {ns}/{name}: DaemonSet {controller[1]} not found"
                return _refused(Refused("daemonset-missing", message, "--force"))
            # kubectl --force evicts a pod whose DaemonSet is gone: nothing recreates it.
            return Disposition("evict", "orphaned DaemonSet pod")
        if finished:
            return Disposition("evict", "finished")
        if not flags.ignore_daemonsets:
            message = f"cannot delete DaemonSet-managed Pods: {ns}/{name}"
            return _refused(Refused("daemonset", message, "--ignore-daemonsets"))
        return Disposition("skip", "DaemonSet-managed")
    if "kubernetes.io/config.mirror" in (meta(pod).get("annotations") or {}):
        return Disposition("skip", "mirror pod")
    refusals: list[Refused] = []
    local = any("emptyDir" in (v or {}) for v in spec_of(pod).get("volumes") or [])
    if local and not finished and not flags.delete_emptydir_data:
        message = f"cannot delete Pods with local storage: {ns}/{name}"
        refusals.append(Refused("emptydir", message, "--delete-emptydir-data"))
    if controller is None and not finished and not flags.allow_unmanaged:
        message = f"cannot delete Pods that declare no controller: {ns}/{name}"
        refusals.append(Refused("no-controller", message, "--force"))
    if refusals:
        return Disposition(None, refusals[0].message, tuple(refusals))
    if meta(pod).get("deletionTimestamp"):
        # Already going (evicted before a restart, or deleted by someone): evicting it again
        # would be a second eviction of the same pod; waiting for it is all that is left. A
        # pod kubectl would refuse is refused all the same, as kubectl's filters do: a resumed
        # drain has the flags its first run had.
        return Disposition("wait", "already terminating")
    return Disposition("evict", "finished" if finished else "evictable")


def _refused(refusal: Refused) -> Disposition:
    return Disposition(None, refusal.message, (refusal,))
