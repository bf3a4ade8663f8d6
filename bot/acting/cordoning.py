"""Cordon, uncordon, taints and annotations on one node, as kubectl does them.

These are the primitives only: whether one may run (approval, re-check, blast radius) is the
executor's business, never these functions'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from bot.errors import TemporaryError
from bot.kube_objects import meta, spec_of
from bot.ports import Cluster


@dataclass(frozen=True)
class NodeChange:
    node: str
    changed: bool
    """False when the node already was as asked (kubectl's "already cordoned")."""


def cordon(cluster: Cluster, node: str) -> NodeChange:
    current = cluster.get("Node", "", node)
    if spec_of(current).get("unschedulable"):
        return NodeChange(node, changed=False)
    cluster.patch_node(node, {"spec": {"unschedulable": True}})
    return NodeChange(node, changed=True)


def take_out(
    cluster: Cluster,
    node: str,
    current: Mapping[str, Any] | None,
    taint: Mapping[str, str] | None,
    annotations: Mapping[str, str],
) -> NodeChange:
    """Cordon, taint and annotate in one patch, computed from `current` (the node as the
    caller just read it; None: read it here); `changed` says whether this cordoned it. The
    patch carries the resourceVersion it was computed from (taints are replaced whole): if
    the node changed since, it is a 409, and the node is read again and the patch computed
    anew. The one way gpubot takes a node out: a first run and a resumed one alike."""
    reads = iter([current])

    def once() -> NodeChange:
        seen = next(reads, None) or cluster.get("Node", "", node)
        taints = _taints(dict(seen))
        wanted = None
        if taint is not None and not any(_same_slot(t, taint, value=True) for t in taints):
            wanted = [*(t for t in taints if not _same_slot(t, taint)), dict(taint)]
        had = meta(seen).get("annotations") or {}
        changes = {k: v for k, v in annotations.items() if had.get(k) != v}
        cordoning = not spec_of(seen).get("unschedulable")
        spec: dict[str, Any] = {"unschedulable": True} if cordoning else {}
        if wanted is not None:
            spec["taints"] = wanted
        if spec or changes:
            metadata = {"resourceVersion": meta(seen).get("resourceVersion")}
            patch = {"metadata": {**metadata, "annotations": changes} if changes else metadata}
            cluster.patch_node(node, {**patch, "spec": spec} if spec else patch)
        return NodeChange(node, changed=cordoning)

    return _read_again_on_conflict(once)


def put_back(
    cluster: Cluster,
    node: str,
    current: Mapping[str, Any] | None,
    taint_key: str,
    annotation_keys: Sequence[str],
) -> NodeChange:
    """Take_out's inverse, in one patch guarded the same way: uncordoned, the taint of
    `taint_key` gone, the annotations of `annotation_keys` removed; `changed` says whether
    this uncordoned it. kubectl's uncordon sends `unschedulable: null`: the field disappears,
    as on a never-cordoned node."""
    reads = iter([current])

    def once() -> NodeChange:
        seen = next(reads, None) or cluster.get("Node", "", node)
        taints = _taints(dict(seen))
        kept = [t for t in taints if t.get("key") != taint_key]
        had = meta(seen).get("annotations") or {}
        gone = {k: None for k in annotation_keys if k in had}
        uncordoning = bool(spec_of(seen).get("unschedulable"))
        spec: dict[str, Any] = {"unschedulable": None} if uncordoning else {}
        if len(kept) != len(taints):
            spec["taints"] = kept or None
        if spec or gone:
            metadata = {"resourceVersion": meta(seen).get("resourceVersion")}
            patch = {"metadata": {**metadata, "annotations": gone} if gone else metadata}
            cluster.patch_node(node, {**patch, "spec": spec} if spec else patch)
        return NodeChange(node, changed=uncordoning)

    return _read_again_on_conflict(once)


def _same_slot(have: Mapping[str, Any], want: Mapping[str, str], value: bool = False) -> bool:
    """A node holds one taint per key and effect (`value`: and the same value)."""
    same = have.get("key") == want.get("key") and have.get("effect") == want.get("effect")
    return same and (not value or have.get("value") == want.get("value"))


def uncordon(cluster: Cluster, node: str) -> NodeChange:
    current = cluster.get("Node", "", node)
    if not spec_of(current).get("unschedulable"):
        return NodeChange(node, changed=False)
    # kubectl sends `unschedulable: null`: the field disappears, as on a never-cordoned node.
    cluster.patch_node(node, {"spec": {"unschedulable": None}})
    return NodeChange(node, changed=True)


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec_of(node).get("taints") or [])


def _replace_taints(
    cluster: Cluster,
    node: str,
    change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
) -> NodeChange:
    """Node taints have no patch merge key: the list is replaced whole, as kubectl taint does.
    So the patch carries the resourceVersion it was computed from: a taint the node
    controller added meanwhile makes it a 409, and it is computed again."""

    def once() -> NodeChange:
        current = cluster.get("Node", "", node)
        wanted = change(_taints(current))
        if wanted is None:
            return NodeChange(node, changed=False)
        version = meta(current).get("resourceVersion")
        cluster.patch_node(
            node, {"metadata": {"resourceVersion": version}, "spec": {"taints": wanted or None}}
        )
        return NodeChange(node, changed=True)

    return _read_again_on_conflict(once)


def add_taint(cluster: Cluster, node: str, key: str, value: str, effect: str) -> NodeChange:
    wanted = {"key": key, "value": value, "effect": effect}

    def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        if any(
            t.get("key") == key and t.get("effect") == effect and t.get("value") == value
            for t in taints
        ):
            return None
        kept = [t for t in taints if not (t.get("key") == key and t.get("effect") == effect)]
        return [*kept, wanted]

    return _replace_taints(cluster, node, change)


def remove_taint(cluster: Cluster, node: str, key: str) -> NodeChange:
    def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        kept = [t for t in taints if t.get("key") != key]
        return None if len(kept) == len(taints) else kept

    return _replace_taints(cluster, node, change)


def annotate(cluster: Cluster, node: str, key: str, value: str | None) -> NodeChange:
    current = (cluster.get("Node", "", node).get("metadata") or {}).get("annotations") or {}
    if current.get(key) == value:
        return NodeChange(node, changed=False)
    cluster.patch_node(node, {"metadata": {"annotations": {key: value}}})
    return NodeChange(node, changed=True)


def set_annotations(cluster: Cluster, node: str, wanted: Mapping[str, str | None]) -> NodeChange:
    """Several annotations in one patch; None removes one. Unchanged values are not sent."""
    current = (cluster.get("Node", "", node).get("metadata") or {}).get("annotations") or {}
    changes = {k: v for k, v in wanted.items() if current.get(k) != v}
    if not changes:
        return NodeChange(node, changed=False)
    cluster.patch_node(node, {"metadata": {"annotations": changes}})
    return NodeChange(node, changed=True)


def _read_again_on_conflict(once: Callable[[], NodeChange]) -> NodeChange:
    """`once` again, from a fresh read, when the node moved under it (a 409 on its
    resourceVersion is a TemporaryError) or the API blinked: a few quick tries, then the error."""
    result: NodeChange = Retrying(
        retry=retry_if_exception_type(TemporaryError),
        wait=wait_exponential(multiplier=0.1, max=1),
        stop=stop_after_attempt(5),
        reraise=True,
    )(once)
    return result
