"""Reading raw Kubernetes objects (the JSON the API server and kubectl print).

Small, dependency-free helpers shared by the snapshot parser, and later by the live cluster
adapter and the simulator: label selectors, quantities, timestamps, owners, event times.
Nothing here knows about GPUs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

Obj = Mapping[str, Any]


def meta(obj: Obj) -> Obj:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def namespace_of(obj: Obj) -> str:
    return str(meta(obj).get("namespace", ""))


def labels_of(obj: Obj) -> dict[str, str]:
    labels = meta(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def event_time(event: Obj) -> datetime | None:
    """The latest moment an Event (core/v1 or events.k8s.io shape) says it happened."""
    series = event.get("series")
    candidates = [
        series.get("lastObservedTime") if isinstance(series, Mapping) else None,
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        meta(event).get("creationTimestamp"),
    ]
    for candidate in candidates:
        parsed = parse_time(candidate)
        if parsed is not None:
            return parsed
    return None


_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_DECIMAL_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}


def int_quantity(value: Any) -> int:
    """A resource quantity as a whole number (extended resources are always integers)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text:
        return 0
    for suffix, factor in (*_BINARY_SUFFIXES.items(), *_DECIMAL_SUFFIXES.items()):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    if text.endswith("m"):
        return int(float(text[:-1]) / 1000)
    try:
        return int(float(text))
    except ValueError:
        return 0


def controller_of(obj: Obj) -> tuple[str, str] | None:
    owners = meta(obj).get("ownerReferences")
    if not isinstance(owners, list):
        return None
    for owner in owners:
        if isinstance(owner, Mapping) and owner.get("controller"):
            return str(owner.get("kind", "")), str(owner.get("name", ""))
    return None


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics; an empty selector matches everything, None nothing."""
    if not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels") or {}
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key = expression.get("key", "")
        operator = expression.get("operator", "")
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def pod_requests(pod: Obj) -> dict[str, int]:
    """Summed container requests (limits stand in for extended resources, as the API does)."""
    totals: dict[str, int] = {}
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for resource, quantity in wanted.items():
            if "/" in resource:
                totals[resource] = totals.get(resource, 0) + int_quantity(quantity)
    return totals


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: null deletes, mappings merge, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def pod_ready(pod: Obj) -> bool:
    """Running, with the Ready condition True: what PDBs and endpoints count as healthy."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def pod_finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
