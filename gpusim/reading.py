"""Small readers of pods and nodes that the simulated scheduler, kubelet and controllers
share: a pod's phase (Pending when unset), its priority, a condition by type, whether a node is
Ready, the controlling owner reference. On top of `bot.kube_objects`' part accessors; they
read and never write.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.kube_objects import meta, name_of, namespace_of, spec_of, status_of
from gpusim.objects import Json
from gpusim.resources import ResourceType
from gpusim.state import ClusterState


def list_all(store: ClusterState, resource: ResourceType) -> list[Json]:
    """Every object of a kind, in every namespace."""
    items, _ = store.list(resource, "")
    return items


def uid_of(obj: Json) -> str:
    return str(meta(obj).get("uid", ""))


def phase_of(pod: Json) -> str:
    return str(status_of(pod).get("phase") or "Pending")


def terminating(obj: Json) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def priority_of(pod: Json) -> int:
    value = spec_of(pod).get("priority")
    return int(value) if isinstance(value, int) else 0


def condition_of(obj: Json, kind: str) -> Json | None:
    for condition in status_of(obj).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def node_ready(node: Json) -> str:
    condition = condition_of(node, "Ready")
    return str(condition.get("status")) if condition else "Unknown"


def controller_ref(obj: Json) -> Json | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def owned_by(pod: Json, kind: str, owner: Json) -> bool:
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") != kind or namespace_of(pod) != namespace_of(owner):
        return False
    if ref.get("uid") and uid_of(owner):
        return str(ref["uid"]) == uid_of(owner)
    return ref.get("name") == name_of(owner)


def micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
