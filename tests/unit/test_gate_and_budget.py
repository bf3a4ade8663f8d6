"""Blast radius (invariant 6) and the step-9 health gate, from facts."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from bot.approval.blast_radius import check_budget
from bot.config import BlastRadius, Settings
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import Snapshot
from bot.facts.taking_out import take_out_facts
from bot.gate.items import (
    ExternalEvidence,
    failing_text,
    gate_failures,
    health_gate,
    item_reason,
)
from bot.model import ClusterFacts, Lang
from bot.names import POOL_LABEL
from tests.helpers.paths import NOW

Edited = Callable[..., Snapshot]
Facts = Callable[..., ClusterFacts]
CLEAN = ExternalEvidence(new_gpu_errors=[])


def _cordon(node: str) -> dict[str, Any]:
    return {"kind": "Node", "name": node, "merge": {"spec": {"unschedulable": True}}}


def _not_ready(node: str) -> dict[str, Any]:
    conditions = [
        {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "PLEG is not healthy",
        }
    ]
    return {"kind": "Node", "name": node, "merge": {"status": {"conditions": conditions}}}


PoolFactsOf = Callable[[Snapshot, str], ClusterFacts]


@pytest.fixture(params=["collected", "taking-out"])
def pool_facts(request: pytest.FixtureRequest, settings: Settings) -> PoolFactsOf:
    """Facts the budget is checked on: every fact of every node (`collect_facts`, what
    `reoffer` reads), and only what the last check before a cordon or drain reads
    (`take_out_facts`). The budget must come out the same from both."""

    def collected(snapshot: Snapshot, _node: str) -> ClusterFacts:
        return collect_facts(snapshot, [], settings, NOW)

    def taking_out(snapshot: Snapshot, node: str) -> ClusterFacts:
        return take_out_facts(snapshot, node, settings, NOW)

    return collected if request.param == "collected" else taking_out


def test_one_node_of_a_small_pool_may_go(edited: Edited, pool_facts: PoolFactsOf) -> None:
    verdict = check_budget(pool_facts(edited(), "gpu-a1"), "gpu-a1", BlastRadius())
    assert verdict.allowed and verdict.budget == 1  # 10% of 4 rounds up to one node


@pytest.mark.parametrize("taken", [_cordon("gpu-a2"), _not_ready("gpu-a2")])
def test_a_second_node_is_refused_whoever_took_the_first(
    edited: Edited, pool_facts: PoolFactsOf, taken: dict[str, Any]
) -> None:
    verdict = check_budget(pool_facts(edited(taken), "gpu-a1"), "gpu-a1", BlastRadius())
    assert not verdict.allowed
    assert verdict.out_of_service == ["gpu-a2"]
    assert (
        "pool a100-east may have 1 of 4 nodes out of service at once; out now: gpu-a2"
        in verdict.reason
    )


def test_the_node_already_out_is_within_budget(edited: Edited, pool_facts: PoolFactsOf) -> None:
    facts = pool_facts(edited(_cordon("gpu-a1")), "gpu-a1")
    assert check_budget(facts, "gpu-a1", BlastRadius()).allowed


def test_a_larger_budget_allows_more(edited: Edited, pool_facts: PoolFactsOf) -> None:
    limits = BlastRadius(max_nodes=2, max_share=0.5)
    assert check_budget(pool_facts(edited(_cordon("gpu-a2")), "gpu-a1"), "gpu-a1", limits).allowed
    facts = pool_facts(edited(_cordon("gpu-a2"), _cordon("gpu-a3")), "gpu-a1")
    assert not check_budget(facts, "gpu-a1", limits).allowed


def _labels(node: str, **labels: str | None) -> dict[str, Any]:
    return {"kind": "Node", "name": node, "merge": {"metadata": {"labels": labels}}}


@pytest.mark.parametrize(
    "edits",
    [
        # The pool's name under another of the pool labels: still one pool of four.
        [
            _labels(
                "gpu-a2",
                **{"eks.amazonaws.com/nodegroup": None, "karpenter.sh/nodepool": "a100-east"},
            ),
            _cordon("gpu-a2"),
        ],
        # A label ranked higher puts a node in another pool, whatever its nodegroup says.
        [_labels("gpu-a2", **{POOL_LABEL: "elsewhere"}), _cordon("gpu-a2")],
        # A node of no pool is a pool of one.
        [
            _labels(
                "gpu-a1",
                **{"eks.amazonaws.com/nodegroup": None, "node.kubernetes.io/instance-type": None},
            ),
            _cordon("gpu-a2"),
        ],
        [_not_ready("gpu-a3"), _cordon("gpu-a4")],
    ],
)
def test_the_budget_counts_the_same_pool_from_the_take_out_facts_as_from_all_facts(
    edited: Edited, settings: Settings, edits: list[dict[str, Any]]
) -> None:
    snapshot = edited(*edits)
    limits = BlastRadius(max_nodes=3, max_share=1.0)
    every = check_budget(collect_facts(snapshot, [], settings, NOW), "gpu-a1", limits)
    narrow = check_budget(take_out_facts(snapshot, "gpu-a1", settings, NOW), "gpu-a1", limits)
    assert narrow == every


def test_a_healthy_node_passes_the_gate_once_errors_were_looked_for(
    edited: Edited, facts_of: Facts
) -> None:
    facts = facts_of(edited())
    gate = health_gate(facts.nodes["gpu-a1"], facts.pools, CLEAN)
    assert gate.passed, gate.failing
    unknown = health_gate(facts.nodes["gpu-a1"], facts.pools, ExternalEvidence())
    assert not unknown.passed  # nobody looked at Prometheus: the gate stays shut
    assert [i.name for i in unknown.failing] == ["no-new-gpu-errors"]


@pytest.mark.parametrize(
    ("edit", "item", "reason"),
    [
        (
            {
                "kind": "Node",
                "name": "gpu-a1",
                "merge": {"status": {"allocatable": {"nvidia.com/gpu": "7"}}},
            },
            "gpus-allocatable",
            "7 of 8 GPUs allocatable",
        ),
        (_not_ready("gpu-a1"), "node-ready", "Ready=False"),
        (
            {
                "kind": "Node",
                "name": "gpu-a1",
                "merge": {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": "535.1"}}},
            },
            "driver-consistent",
            "pool a100-east mostly runs 550.54.15",
        ),
        (
            {
                "kind": "Node",
                "name": "gpu-a1",
                "merge": {
                    "metadata": {
                        "labels": {
                            "nvidia.com/mig.config": "all-1g.10gb",
                            "nvidia.com/mig.config.state": "pending",
                        }
                    }
                },
            },
            "mig-state",
            "nvidia.com/mig.config.state=pending",
        ),
    ],
)
def test_each_gate_item_fails_on_its_fact(
    edited: Edited, facts_of: Facts, edit: dict[str, Any], item: str, reason: str
) -> None:
    facts = facts_of(edited(edit))
    gate = health_gate(facts.nodes["gpu-a1"], facts.pools, CLEAN)
    failing = {i.name: i.reason for i in gate.failing}
    assert not gate.passed and reason in failing[item]


def test_new_gpu_errors_and_required_diagnostics_close_the_gate(
    edited: Edited, facts_of: Facts
) -> None:
    facts = facts_of(edited())
    node = facts.nodes["gpu-a1"]
    errors = health_gate(node, facts.pools, ExternalEvidence(new_gpu_errors=["Xid 48 on GPU 2"]))
    assert {i.name: i.reason for i in errors.failing} == {"no-new-gpu-errors": "Xid 48 on GPU 2"}
    diag = health_gate(
        node, facts.pools, ExternalEvidence(new_gpu_errors=[], require_dcgm_diag=True)
    )
    assert [i.name for i in diag.failing] == ["dcgm-diag"]
    done = ExternalEvidence(new_gpu_errors=[], require_dcgm_diag=True, dcgm_diag_passed=True)
    assert health_gate(node, facts.pools, done).passed


def test_gate_items_read_in_the_readers_language_and_the_facts_stay_english(
    edited: Edited, facts_of: Facts
) -> None:
    facts = facts_of(
        edited(
            {
                "kind": "Node",
                "name": "gpu-a1",
                "merge": {"status": {"allocatable": {"nvidia.com/gpu": "7"}}},
            }
        )
    )
    node = facts.nodes["gpu-a1"]
    gate = health_gate(node, facts.pools, ExternalEvidence())
    assert failing_text(gate.failing, Lang.EN) == (
        "gpus-allocatable: 7 of 8 GPUs allocatable; "
        "no-new-gpu-errors: no Prometheus evidence for the window"
    )
    assert failing_text(gate.failing, Lang.ZH) == (
        "GPU 可分配：可分配 GPU 7/8；无新 GPU 错误：观察窗口内没有 Prometheus 数据"
    )
    for item in gate.items:
        data = item.as_data()
        stored = item_reason(Lang.ZH, data["key"], data["values"], item.reason)
        assert stored == item.text(Lang.ZH) and re.search(r"[\u4e00-\u9fff]", stored), item
    # What the rules read does not change with the language.
    assert gate_failures(node, facts.pools, "nvidia.com/gpu") == ["nvidia.com/gpu allocatable 7/8"]
