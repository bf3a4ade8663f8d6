"""PodDisruptionBudget arithmetic, as the disruption controller and the eviction REST handler
do it: which pods a budget counts, how many may go, and the 429 an eviction gets when none
may. Pure functions of the objects they are given: they must never keep state, write, or
read a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.kube_objects import controller_of, meta, name_of, pod_finished, pod_ready, spec_of
from bot.kube_objects import status_of as _status_of
from gpusim.objects import Json
from gpusim.resources import ApiError


def owner_key(pod: Json) -> str:
    """The controller a pod belongs to ("Kind/name"), or the pod itself: what a budget's
    disrupted pods are counted by until a replacement stands in."""
    owner = controller_of(pod)
    return f"{owner[0]}/{owner[1]}" if owner else f"Pod/{name_of(pod)}"


def counted(pods: Iterable[Json]) -> list[Json]:
    """The pods a budget counts: every matching pod that has not finished."""
    return [p for p in pods if not pod_finished(p)]


def budget_status(pdb: Json, pods: list[Json], disrupted: int) -> Json:
    """`status` of `pdb` given the pods it selects (not finished) and how many pods it let go
    that no replacement has stood in for yet (they still count as expected)."""
    spec = spec_of(pdb)
    expected = len(pods) + disrupted
    healthy = sum(1 for p in pods if pod_ready(p) and not meta(p).get("deletionTimestamp"))
    if "minAvailable" in spec:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    elif "maxUnavailable" in spec:
        desired = expected - _scaled(spec["maxUnavailable"], expected, round_up=True)
    else:
        desired = expected
    return {
        **_status_of(pdb),
        "observedGeneration": meta(pdb).get("generation", 1),
        "expectedPods": expected,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": max(0, healthy - desired),
    }


def violation(pdb: Json, status: Json) -> ApiError:
    """The eviction handler's answer when `pdb` allows no disruption."""
    return ApiError(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
        {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": (
                        f"The disruption budget {name_of(pdb)} needs "
                        f"{status['desiredHealthy']} healthy pods and has "
                        f"{status['currentHealthy']} currently"
                    ),
                }
            ]
        },
    )


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total
        return -(-share // 100) if round_up else share // 100
    return int(value)
