"""One health gate (issue "The house", finding 4): what the rules and `/gpubot status` read
(`NodeFacts.gate_failures`) and what the executor enforces before an uncordon
(`health_gate`) are the same judgement of the same node, whatever the fault. Before, two
gates disagreed: status could show no failure while an uncordon was refused."""

from __future__ import annotations

import inspect

import pytest

from bot.config import Settings
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import parse_snapshot
from bot.gate.items import ExternalEvidence, health_gate
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from gpusim.faults import FAULTS, fault_parameters, inject
from gpusim.resources import RESOURCES
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster
from gpusim.state import ClusterState

NODE = "gpu-a2"
PARAMS = {
    "xid": {"code": 79, "gpu": 3},
    "ecc-dbe": {"gpu": 5},
    "nvlink": {"gpu": 2, "link": 3},
    "mig-failed": {"config": "all-1g.10gb"},
    "driver-upgrade": {"version": "570.86.15"},
}


@pytest.mark.parametrize("fault", [None, *FAULTS])
def test_the_rules_status_and_the_executor_judge_a_node_alike(fault: str | None) -> None:
    state = ClusterState()
    state.load(healthy_cluster(4, FIXTURE_NOW)["items"])
    alerts = []
    if fault is not None:
        params = PARAMS.get(fault, {})
        assert set(params) >= {
            k for k, v in fault_parameters(fault).items() if v is inspect.Parameter.empty
        }
        alerts = inject(state, fault, NODE, FIXTURE_NOW, **params).alerts
    items = []
    for resource in RESOURCES:
        found, _ = state.list(resource, "")
        items += [{**obj, "kind": resource.kind} for obj in found]
    settings = Settings()
    payload = validate_payload({"status": "firing", "alerts": alerts}, "test")
    signals = signals_from_payload(payload, settings.node_labels)
    facts = collect_facts(
        parse_snapshot({"kind": "List", "items": items}, "sim"), signals, settings, FIXTURE_NOW
    )
    node = facts.nodes[NODE]
    enforced = health_gate(
        node, facts.pools, ExternalEvidence(new_gpu_errors=[]), settings.gpu_resource
    )
    from_facts = [i.fact or i.reason for i in enforced.items if i.outcome == "fail"]
    # What the rules and the status command show is what the executor refuses an uncordon on.
    assert node.gate_failures == from_facts
    assert enforced.passed == (not node.gate_failures)
