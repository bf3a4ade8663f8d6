"""The pods the simulated controllers create: from a ReplicaSet's or DaemonSet's template, or
in place of a lost pod, as the real controllers build them (owner reference, generateName,
fresh token volume name, the DaemonSet's node affinity and default tolerations, its
revision labels). Pure builders: they read the objects they are given and must never write.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.kube_objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    pod_ready,
    spec_of,
    status_of,
)
from gpusim.objects import (
    DEFAULT_SCHEDULER,
    GPU_OPERATOR_NS,
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    UNSCHEDULABLE_TAINT,
    Json,
    digest,
)
from gpusim.reading import (
    uid_of,
)
from gpusim.scheduling import node_affinity_matches, untolerated_taint

_DAEMON_TOLERATIONS = (
    {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute"},
    {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
)
"""What the DaemonSet controller adds to every pod it creates (AddOrUpdateDaemonPodTolerations)."""


def keep_order(pod: Json) -> tuple[bool, str, str]:
    """Which of several daemon pods on a node stays: a ready one, then the oldest."""
    return (not pod_ready(pod), str(meta(pod).get("creationTimestamp", "")), name_of(pod))


def owner_ref(owner: Json) -> Json:
    return {
        "apiVersion": owner.get("apiVersion", "apps/v1"),
        "kind": owner.get("kind", ""),
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _fresh_volumes(spec: Json) -> None:
    """The ServiceAccount admission plugin names the token volume per pod."""
    suffix = uuid.uuid4().hex[:5]
    renamed: dict[str, str] = {}
    for volume in spec.get("volumes") or []:
        name = str(volume.get("name", ""))
        if name.startswith("kube-api-access-"):
            renamed[name] = f"kube-api-access-{suffix}"
            volume["name"] = renamed[name]
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") in renamed:
                mount["name"] = renamed[mount["name"]]


def replacement(old: Json, owner: str) -> Json:
    """What the Job / ReplicaSet controller creates in place of a lost pod."""
    old_meta = meta(old)
    metadata: Json = {
        "generateName": f"{owner}-",
        "labels": dict(labels_of(old)),
        "ownerReferences": copy.deepcopy(old_meta.get("ownerReferences") or []),
    }
    if old_meta.get("annotations"):
        metadata["annotations"] = copy.deepcopy(old_meta["annotations"])
    spec = copy.deepcopy(dict(spec_of(old)))
    spec.pop("nodeName", None)
    _fresh_volumes(spec)
    status: Json = {"phase": "Pending"}
    if status_of(old).get("qosClass"):
        status["qosClass"] = status_of(old)["qosClass"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def from_template(owner: Json, siblings: list[Json]) -> Json:
    """A pod from `spec.template`; a template without containers borrows a sibling's spec."""
    template = copy.deepcopy(spec_of(owner).get("template") or {})
    template_meta = meta(template)
    spec = dict(spec_of(template))
    if not spec.get("containers"):
        base = _base_spec(owner, siblings)
        spec = {**base, **spec}
    spec.pop("nodeName", None)
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    _fresh_volumes(spec)
    metadata: Json = {
        "generateName": f"{name_of(owner)}-",
        "labels": dict(template_meta.get("labels") or {}),
        "ownerReferences": [owner_ref(owner)],
    }
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(template_meta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def template_generation(pod: Json) -> int:
    value = labels_of(pod).get("pod-template-generation", "")
    return int(value) if value.isdigit() else 0


def _base_spec(owner: Json, siblings: list[Json]) -> Json:
    newest = max(
        siblings,
        key=lambda p: (template_generation(p), str(meta(p).get("creationTimestamp", ""))),
        default=None,
    )
    if newest is not None:
        spec = copy.deepcopy(dict(spec_of(newest)))
        spec.pop("nodeName", None)
        spec.pop("affinity", None)
        return spec
    name = name_of(owner)
    image = (
        f"nvcr.io/nvidia/{name}:v24.3.0"
        if namespace_of(owner) == GPU_OPERATOR_NS
        else "registry.k8s.io/pause:3.9"
    )
    return {
        "containers": [
            {
                "name": name,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": DEFAULT_SCHEDULER,
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
    }


def daemon_target(pod: Json) -> str:
    """util.GetTargetNodeName: nodeName, else the controller's metadata.name affinity."""
    spec = spec_of(pod)
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for requirement in term.get("matchFields") or []:
            values = requirement.get("values") or []
            if requirement.get("key") == "metadata.name" and len(values) == 1:
                return str(values[0])
    return ""


def daemon_tolerations(template: Mapping[str, Any]) -> list[Json]:
    tolerations = [t for t in template.get("tolerations") or [] if isinstance(t, dict)]
    for default in _DAEMON_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") == default["effect"]
            for t in tolerations
        ):
            tolerations.append(dict(default))
    return tolerations


def daemon_fits(template: Mapping[str, Any], node: Json) -> tuple[bool, bool]:
    """(should run, should continue running), as the DaemonSet controller's predicates say."""
    if not node_affinity_matches(template, node):
        return False, False
    taints = [t for t in spec_of(node).get("taints") or [] if isinstance(t, dict)]
    tolerations = daemon_tolerations(template)
    if untolerated_taint(taints, tolerations) is None:
        return True, True
    return False, untolerated_taint(taints, tolerations, ("NoExecute",)) is None


def daemon_pod(ds: Json, node: str, siblings: list[Json], now: datetime) -> Json:
    body = from_template(ds, siblings)
    spec = body["spec"]
    spec["tolerations"] = daemon_tolerations(spec)
    affinity = spec.setdefault("affinity", {})
    affinity["nodeAffinity"] = {
        **(affinity.get("nodeAffinity") or {}),
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    newest = [p for p in siblings if labels_of(p).get("controller-revision-hash")]
    template_hash = digest(name_of(ds), repr(spec_of(ds).get("template")), length=10)
    generation = str(meta(ds).get("generation", 1))
    if newest:
        latest = max(newest, key=template_generation)
        template_hash = labels_of(latest)["controller-revision-hash"]
        generation = labels_of(latest).get("pod-template-generation", generation)
    body["metadata"]["labels"].update(
        {"controller-revision-hash": template_hash, "pod-template-generation": generation}
    )
    return body
