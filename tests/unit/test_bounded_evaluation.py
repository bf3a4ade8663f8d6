"""A rule that cannot be evaluated on one subject is that rule's error on that subject, never
the pass's: the other rules, and the same rule on other nodes, still diagnose. And what a rule
iterates over is bounded: the alerts of a node reach it aggregated and capped."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.facts.snapshots import load_snapshot
from bot.model import Signal
from bot.roots.offline import diagnose_snapshot
from bot.rules.contexts import ALERTS_PER_NODE, aggregated_alerts
from bot.rules.loading import EVIDENCE_ONLY, load_rules
from tests.helpers.paths import HEALTHY, NOW, RULES

# Three nested loops over a node's alerts: with 30 distinct alerts that is 27,000 steps,
# past cel-cpp's iteration budget (about 10,000), whatever the cap on alerts.
BUDGET_BREAKER = """
rules:
  - id: budget-breaker
    stages: [any]
    severity: warning
    when: alerts.exists(a, alerts.exists(b, alerts.exists(c, a.gpu + b.gpu + c.gpu == "x")))
    title: {zh: 预算, en: budget}
    diagnosis: {zh: 预算, en: budget}
    causes: {zh: [预算], en: [budget]}
    check_first: {zh: 预算, en: budget}
    runbook:
      - text: {zh: 预算, en: budget}
    rollback: {zh: 预算, en: budget}
    proposals:
      - action: none
"""


def _alert(
    node: str, index: int, name: str = "GPUTemperatureHigh", unread: bool = False, **labels: str
) -> Signal:
    gpu = labels.pop("gpu", str(index % 8))
    return Signal(
        source="alertmanager",
        name=name,
        node=node,
        gpu=gpu,
        labels={"alertname": name, "node": node, "gpu": gpu, "id": str(index), **labels},
        # What the alert mapping marks on an alert no rule reads.
        annotations={EVIDENCE_ONLY: "true"} if unread else {},
        starts_at=NOW,
        fingerprint=f"{node}-{name}-{index}",
    )


def _xid79(node: str) -> Signal:
    return _alert(node, 0, "GPUXidError", gpu="3", xid="79")


def test_a_rule_over_its_budget_on_one_node_is_its_error_there_and_nothing_else_stops(
    tmp_path: Path,
) -> None:
    (tmp_path / "breaker.yaml").write_text(BUDGET_BREAKER)
    rules = load_rules([RULES, tmp_path / "breaker.yaml"])
    assert not rules.errors
    # 30 different alerts (distinct GPUs) on gpu-a1 and a fatal Xid on gpu-a2.
    many = [_alert("gpu-a1", i, gpu=str(i)) for i in range(30)]
    result = diagnose_snapshot(
        load_snapshot(HEALTHY), [*many, _xid79("gpu-a2")], rules, Settings(), NOW
    )
    found = {(d.node, d.rule) for d in result.diagnoses}
    assert ("gpu-a2", "gpu-fell-off-bus") in found
    assert ("gpu-a1", "gpu-thermal-power") in found  # the other rules on the same node go on
    assert [(e.rule_id, "gpu-a1" in e.message) for e in result.errors] == [("budget-breaker", True)]
    assert "budget" in result.errors[0].message


def test_thousands_of_alerts_on_one_node_do_not_stop_the_diagnosis_of_another() -> None:
    # All on one GPU with distinct labels: the shipped gpu-thermal-power rule compares every
    # pair of them, which once raised out of the whole pass.
    many = [_alert("gpu-a1", i, gpu="0") for i in range(3000)]
    result = diagnose_snapshot(
        load_snapshot(HEALTHY), [*many, _xid79("gpu-a2")], load_rules([RULES]), Settings(), NOW
    )
    found = {(d.node, d.rule) for d in result.diagnoses}
    assert ("gpu-a2", "gpu-fell-off-bus") in found
    assert ("gpu-a1", "gpu-thermal-power") in found
    assert result.errors == []


def test_a_nodes_alerts_reach_the_rules_counted_per_name_gpu_and_xid_and_capped() -> None:
    alerts = [_alert("gpu-a1", i, gpu="0") for i in range(500)]
    alerts += [_alert("gpu-a1", i, "GPUXidError", gpu="1", xid="79") for i in range(3)]
    alerts += [_alert("gpu-a1", 1000 + i, "SomeOtherAlert", True, gpu=str(i)) for i in range(200)]
    seen = aggregated_alerts(alerts)
    assert len(seen) == ALERTS_PER_NODE
    hot = [a for a in seen if a["name"] == "GPUTemperatureHigh"]
    assert [(a["gpu"], a["count"]) for a in hot] == [("0", 500)]
    [xid] = [a for a in seen if a["name"] == "GPUXidError"]
    assert (xid["gpu"], xid["labels"]["xid"], xid["count"]) == ("1", "79", 3)
    assert sum(a["count"] for a in seen) < len(alerts)  # the rest were cut at the cap


def test_an_alert_the_store_already_counted_counts_as_many_for_the_rules() -> None:
    """The store hands a pass one alert per kind with `count` (how many of that kind fire);
    a rule must see 5,000 hot GPUs as 5,000, not as the one alert that stands for them."""
    counted = _alert("gpu-a1", 0, gpu="0").model_copy(update={"count": 5000})
    also = _alert("gpu-a1", 1, gpu="0")
    [seen] = aggregated_alerts([counted, also])
    assert seen["count"] == 5001
