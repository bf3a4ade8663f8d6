"""The lifecycle stage, inferred from facts: the runbook's first step."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.config import Settings
from bot.diagnose import infer_stage
from bot.facts.snapshots import Snapshot
from bot.model import ClusterFacts, Stage

CORDONED = {"spec": {"unschedulable": True}}


def _event(reason: str, at: str) -> dict[str, object]:
    return {
        "add": {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"gpu-a1.{reason.lower()}", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "gpu-a1", "uid": "gpu-a1"},
            "reason": reason,
            "message": f"Node gpu-a1 {reason}",
            "source": {"component": "kubelet", "host": "gpu-a1"},
            "firstTimestamp": at,
            "lastTimestamp": at,
            "count": 1,
            "type": "Normal",
        }
    }


@pytest.mark.parametrize(
    ("edits", "stage"),
    [
        ([], Stage.STEADY),
        (
            [
                {
                    "kind": "Node",
                    "name": "gpu-a1",
                    "merge": {"metadata": {"creationTimestamp": "2026-12-02T02:40:00Z"}},
                }
            ],
            Stage.JOIN,
        ),
        ([{"kind": "Node", "name": "gpu-a1", "merge": CORDONED}], Stage.DRAIN),
        ([_event("Rebooted", "2026-12-02T02:50:00Z")], Stage.REBOOT),
        ([_event("Rebooted", "2026-12-01T20:00:00Z")], Stage.STEADY),
        ([_event("NodeSchedulable", "2026-12-02T02:45:00Z")], Stage.REJOIN),
        (
            [
                {
                    "kind": "Node",
                    "name": "gpu-a1",
                    "merge": {
                        "metadata": {
                            "labels": {"nvidia.com/gpu-driver-upgrade-state": "drain-required"}
                        }
                    },
                }
            ],
            Stage.UPGRADE,
        ),
        (
            [
                {
                    "kind": "Node",
                    "name": "gpu-a1",
                    "merge": {
                        "metadata": {
                            "labels": {
                                "nvidia.com/mig.config": "all-1g.10gb",
                                "nvidia.com/mig.config.state": "rebooting",
                            }
                        }
                    },
                }
            ],
            Stage.MIG,
        ),
        # MIG beats cordon: mig-manager may cordon a node while it reconfigures.
        (
            [
                {
                    "kind": "Node",
                    "name": "gpu-a1",
                    "merge": {
                        **CORDONED,
                        "metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}},
                    },
                }
            ],
            Stage.MIG,
        ),
        # A reboot while cordoned is the reboot step of a maintenance.
        (
            [
                {"kind": "Node", "name": "gpu-a1", "merge": CORDONED},
                _event("Rebooted", "2026-12-02T02:50:00Z"),
            ],
            Stage.REBOOT,
        ),
    ],
)
def test_stage_is_inferred_from_facts(
    edits: list[dict[str, object]],
    stage: Stage,
    edited: Callable[..., Snapshot],
    facts_of: Callable[..., ClusterFacts],
    settings: Settings,
) -> None:
    node = facts_of(edited(*edits)).nodes["gpu-a1"]
    assert infer_stage(node, settings) is stage
