"""The cells and columns every server-side printer shares: ages (`HumanDuration`), label and
selector text, a template's containers, the NAME / AGE columns, and the NAME / CREATED AT pair
the default table convertor gives a kind without a printer of its own.

It exists so that the per-kind printers (`gpusim.core_printers`, `gpusim.pod_printer`,
`gpusim.workload_printers`, `gpusim.access_printers`) spell these the one way apimachinery
and printers.go do, without importing one another. Pure functions of what they are given and
the time: they must never read the cluster or know about a particular kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from bot.kube_objects import meta, name_of, spec_of
from gpusim.objects import Json

Cell = str | int | bool | None
Printer = tuple[list[Json], Callable[[Json, datetime], list[Cell]]]
"""A kind's column definitions and the function that fills one row of them."""


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def parse_time(stamp: Any) -> datetime | None:
    if not stamp:
        return None
    text = str(stamp).replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(stamp: Any, now: datetime) -> str:
    """translateTimestampSince: `<unknown>` for a zero time."""
    parsed = parse_time(stamp)
    if parsed is None:
        return "<unknown>"
    return human_duration((now - parsed).total_seconds())


def column(name: str, description: str, kind: str = "string", priority: int = 0) -> Json:
    column: Json = {"name": name, "type": kind, "format": "", "description": description}
    if name == "Name":
        column["format"] = "name"
    column["priority"] = priority
    return column


NAME = column("Name", "Name must be unique within a namespace.")
AGE = column(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
)
CONTAINERS = column("Containers", "Names of each container in the template.", priority=1)
IMAGES = column("Images", "Images referenced by each container in the template.", priority=1)
SELECTOR = column("Selector", "A label selector.", priority=1)


def container_cells(template_spec: Mapping[str, Any]) -> tuple[str, str]:
    """layoutContainerCells."""
    containers = template_spec.get("containers") or []
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.FormatLabels: sorted `k=v` joined by commas, `<none>` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector."""
    if selector is None:
        return "<none>"
    parts: list[str] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        parts.append(f"{key}={value}")
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = sorted(expression.get("values") or [])
        if operator == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif operator == "Exists":
            parts.append(key)
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    text = ",".join(parts)
    return text if text else "<none>"


def condition_true(conditions: list[Json], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def template_spec(obj: Json) -> Json:
    return dict((spec_of(obj).get("template") or {}).get("spec") or {})


CREATED_AT_COLUMNS: list[Json] = [
    NAME,
    column(
        "Created At",
        "CreationTimestamp is a timestamp representing the server time when "
        "this object was created.",
        "date",
    ),
]


def created_at_row(obj: Json, now: datetime) -> list[Cell]:
    """printRole's row, and the default convertor's: the creation time as stored, not an age."""
    return [name_of(obj), str(meta(obj).get("creationTimestamp", ""))]
