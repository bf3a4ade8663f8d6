"""Reading raw Kubernetes objects (the JSON the API server and kubectl print).

Small, dependency-free helpers shared by gpubot and the simulator (`gpusim`, which may import
nothing else of gpubot): the parts of an object, label selectors, quantities exactly as
`resource.Quantity` reads them, what a pod requests, timestamps, owners, event times.
Nothing here knows about GPUs, and nothing here does I/O.
"""

from __future__ import annotations

import copy
import re
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any, cast

Obj = dict[str, Any]
"""A raw Kubernetes object: the JSON the API server returns and kubectl prints. Readers below
take any `Mapping` and never fail on a missing or malformed part: they give it empty."""

View = Mapping[str, Any]


DECODED_PARTS: set[type] = set()
"""The struct types a trimmed snapshot's objects are decoded into (`bot.facts.decoding`
adds them): read as the dicts they stand for, a field is also their attribute, UNSET (not a
mapping) where the input lacked it."""


def _part(obj: View, key: str) -> View:
    # Called with the API's field names only (never a method's). Both reads spare a Python
    # frame or an ABC check on the costliest lines of a 100,000-pod snapshot's facts:
    # a decoded part's field is read as its attribute, parsed JSON is told by its exact type.
    value = getattr(obj, key, None) if type(obj) in DECODED_PARTS else obj.get(key)
    kind = type(value)
    if kind is dict or kind in DECODED_PARTS or isinstance(value, Mapping):
        return cast(View, value)
    return {}


def meta(obj: View) -> View:
    return _part(obj, "metadata")


def spec_of(obj: View) -> View:
    return _part(obj, "spec")


def status_of(obj: View) -> View:
    return _part(obj, "status")


def name_of(obj: View) -> str:
    return str(meta(obj).get("name", ""))


def namespace_of(obj: View) -> str:
    return str(meta(obj).get("namespace", ""))


def labels_of(obj: View) -> dict[str, str]:
    labels = meta(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def event_time(event: View) -> datetime | None:
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


_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$"
)
_SCALE = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def quantity(value: Any, milli: bool = False) -> int:
    """A `resource.Quantity` as its `Value()` (or `MilliValue()`): exact decimal arithmetic,
    rounded up as the API server rounds; 0 when it is not a quantity."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value * 1000 if milli else value
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return 0
    try:
        number = Decimal(match.group(1)) * _SCALE[match.group(2) or ""]
    except InvalidOperation:
        return 0
    if milli:
        number *= 1000
    return int(number.to_integral_value(rounding=ROUND_CEILING))


def resource_amount(resource: str, value: Any) -> int:
    return quantity(value, milli=resource == "cpu")


def container_requests(container: View) -> dict[str, int]:
    """Requests, limits standing in where a request is missing (the API server's defaulting)."""
    resources = _part(container, "resources")
    wanted = {**_part(resources, "limits"), **_part(resources, "requests")}
    return {str(name): resource_amount(str(name), value) for name, value in wanted.items()}


def pod_requests(pod: View) -> dict[str, int]:
    """What the scheduler's NodeResourcesFit counts: the sum of the containers, at least each
    init container, plus overhead; cpu in millicores, memory and storage in bytes, extended
    resources (`nvidia.com/gpu`) as they are."""
    spec = spec_of(pod)
    total: dict[str, int] = defaultdict(int)
    for container in spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] += amount
    for container in spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            total[name] = max(total[name], amount)
    for name, value in _part(spec, "overhead").items():
        total[str(name)] += resource_amount(str(name), value)
    return {name: amount for name, amount in total.items() if amount}


def controller_of(obj: View) -> tuple[str, str] | None:
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


def pod_ready(pod: View) -> bool:
    """Running, with the Ready condition True: what PDBs and endpoints count as healthy."""
    status = status_of(pod)
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def pod_finished(pod: View) -> bool:
    return status_of(pod).get("phase") in ("Succeeded", "Failed")
