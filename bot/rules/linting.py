"""`gpubot rules lint` beyond the schema: every CEL expression of every rule is evaluated
against reference facts in which every field exists, so a misspelt field (`node.gpu.alocatable`)
is caught at lint time instead of at 3 a.m. on the first node that reaches it.

The alert mapping beside the rules (`alerts.yaml`) is checked against them: its schema and
regular expressions, every symptom's `as_alert` an alert name some rule reads (or null),
every rule it names defined, every entry's source given, no alert name listed twice."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.errors import InputError, RuleError
from bot.facts.nodes import GPU_FAULT_ALERTS
from bot.model import (
    Blocker,
    ClusterFacts,
    ComponentFacts,
    GpuFacts,
    Lang,
    NodeFacts,
    PendingPod,
    PodFacts,
    PoolFacts,
    SchedulingReason,
    Signal,
    Stage,
    XidFacts,
)
from bot.rules.cel import SORTED_KEYS, VARIABLES, Activation, EvaluationError, Expression
from bot.rules.contexts import cluster_context, node_context, node_pool_context, pool_context
from bot.rules.loading import CompiledRule, RuleSet, read_alert_mapping
from bot.rules.matching import to_blockers, with_variables
from bot.yamlfiles import load_located


def _reference_node() -> NodeFacts:
    pod = PodFacts(
        name="train-0",
        namespace="ml",
        phase="Running",
        owner_kind="Job",
        owner_name="train",
        component="nvidia-device-plugin-daemonset",
        gpu_request=1,
        restarts=1,
        waiting_reason="CrashLoopBackOff",
        failing_container="main",
        last_exit_code=1,
        last_reason="Error",
        last_message="m",
        last_restart_s=1,
        failing=True,
        terminating=False,
        finalizers=[],
        grace_period_s=30,
        emptydir=True,
        mirror=False,
        daemonset=False,
        age_s=60,
        must_leave=True,
    )
    component = ComponentFacts(
        name="nvidia-device-plugin-daemonset",
        pod="p",
        present=True,
        phase="Running",
        failing=True,
        waiting_reason="CrashLoopBackOff",
        failing_container="main",
        last_reason="Error",
        last_restart_s=1,
        restarts=9,
        deploy_label=True,
    )
    return NodeFacts(
        name="ref",
        pool="pool",
        labels={"a": "b"},
        ready="True",
        conditions={"Ready": "True"},
        condition_messages={"Ready": "ok"},
        unschedulable=True,
        taints=["t:NoSchedule"],
        cordoned_for_s=1,
        age_s=1,
        since_reboot_s=1,
        since_uncordon_s=1,
        boot_id="b",
        kubelet_version="v",
        runtime_version="r",
        gpu_node=True,
        gpu=GpuFacts(
            capacity=8,
            allocatable=8,
            count_label=8,
            present_label=True,
            product="p",
            mig_capacity={"nvidia.com/mig-1g.10gb": 1},
            mig_allocatable={"nvidia.com/mig-1g.10gb": 1},
        ),
        driver_version="1",
        upgrade_state="upgrade-done",
        mig_config="all-1g.10gb",
        mig_state="success",
        deploy_labels={"device-plugin": True},
        components={"nvidia-device-plugin-daemonset": component},
        pods=[pod],
        remaining_pods=1,
        blockers=[Blocker(kind="pdb", pod="p", namespace="n", detail="d")],
        pods_after_cordon=["ml/p"],
        xids=[XidFacts(code=79, gpu="0", source="s")],
        gate_failures=["x"],
        events=["Rebooted"],
    )


def reference_contexts(ruleset: RuleSet, settings: Settings) -> dict[str, dict[str, Any]]:
    """Per scope (node, pool, cluster), the variables a rule of that scope meets, built by the
    same code diagnosis uses: a node rule reading what only a pool rule sees (`pool.nodes`,
    `pool.findings`) is a lint error, not an error at 3 a.m."""
    node = _reference_node()
    pool = PoolFacts(
        name="pool",
        nodes=["ref"],
        gpu_pool=True,
        driver_versions={"1": 1},
        upgrade_states={"upgrade-done": 1},
        gpu_present=1,
        deploy_labelled=1,
    )
    pending = PendingPod(
        name="p",
        namespace="n",
        owner="ReplicaSet/r",
        requests={"nvidia.com/gpu": 1},
        pending_s=1,
        reasons=[SchedulingReason(kind="insufficient-gpu", count=1, text="t")],
        message="m",
        unoffered_resources=["nvidia.com/gpus"],
        evicted_from="ref",
    )
    cluster = ClusterFacts(
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        nodes={"ref": node},
        pools={"pool": pool},
        pending_pods=[pending],
        offered_resources=["nvidia.com/gpu"],
    )
    alert = Signal(
        source="alertmanager",
        name="GPUXidError",
        node="ref",
        gpu="0",
        labels={"alertname": "GPUXidError", "xid": "79"},
        fingerprint="f",
    )
    return {
        "node": node_context(
            node,
            Stage.STEADY,
            [alert],
            ruleset.xid_catalog,
            node_pool_context(pool),
            settings,
            Lang.EN,
            ["r"],
        ),
        "pool": pool_context(pool, {"r": 1}, ["r"], settings),
        "cluster": cluster_context(cluster, settings),
    }


def _expressions(rule: CompiledRule) -> list[tuple[str, Expression]]:
    named: list[tuple[str, Expression]] = [("when", rule.when)]
    named += [
        (f"severity_overrides[{i}].when", e) for i, (e, _) in enumerate(rule.severity_overrides)
    ]
    named += [(f"proposals[{i}].when", e) for i, (e, _, _) in enumerate(rule.proposals) if e]
    named += [(f"evidence[{i}]", e) for i, e in enumerate(rule.evidence)]
    if rule.blockers is not None:
        named.append(("blockers", rule.blockers))
    return named


def lint_rules(ruleset: RuleSet, settings: Settings) -> list[RuleError]:
    problems = []
    references = {
        scope: Activation(context)
        for scope, context in reference_contexts(ruleset, settings).items()
    }
    for rule in ruleset.rules:
        try:
            activation = with_variables(rule, references[rule.spec.scope])
        except EvaluationError as exc:
            problems.append(RuleError(rule.where, str(exc), rule.id))
            continue
        named = [(f"variables.{n}", e) for n, e in rule.variables] + _expressions(rule)
        for name, expression in named:
            try:
                value = expression.evaluate(activation)
                if expression is rule.blockers:
                    to_blockers(value)
            except EvaluationError as exc:
                problems.append(RuleError(rule.where, f"{name}: {exc}", rule.id))
            for path in _maps_iterated(expression.source, activation):
                problems.append(
                    RuleError(
                        rule.where,
                        f"{name}: `{path}` is a map, iterated in an order that changes from "
                        f"one process to the next: iterate `{path}.{SORTED_KEYS}()`",
                        rule.id,
                    )
                )
    mappings = [settings.alerts_file] if settings.alerts_file else ruleset.alert_mappings
    for mapping in mappings:
        problems += lint_alert_mapping(mapping, ruleset)
    return problems


_ITERATED = re.compile(r"(?<![\w.\])])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*\.\s*(?:map|filter)\s*\(")
"""A field path a `map` or `filter` macro iterates: `node.components.filter(`."""


def _maps_iterated(source: str, activation: Activation) -> list[str]:
    """The field paths `source` iterates with `map` or `filter` that are maps in the reference
    facts. A path the reference cannot tell (a macro's own variable) is left alone."""
    found = []
    for path in dict.fromkeys(_ITERATED.findall(source)):
        if path.split(".")[0] not in VARIABLES:
            continue
        try:
            value = Expression(path).evaluate(activation)
        except EvaluationError:
            continue
        if isinstance(value, dict):
            found.append(path)
    return found


EVIDENCE_READS = frozenset({"GPUXidError", *GPU_FAULT_ALERTS})
"""Alert names the facts read besides the rules: Xids (`bot.facts.nodes.xids_of`) and the
GPU faults the health gate names."""
_NAME_IS = re.compile(r'\.name\s*(?:==|!=)\s*"([^"]+)"|"([^"]+)"\s*(?:==|!=)\s*\w+\.name\b')
_NAME_IN = re.compile(r"\.name\s+in\s*\[([^\]]*)\]")
_QUOTED = re.compile(r'"([^"]+)"')


def alert_names_read(ruleset: RuleSet) -> set[str]:
    """Every alert name some rule compares `a.name` with, and those the facts read."""
    names = set(EVIDENCE_READS)
    for rule in ruleset.rules:
        spec = rule.spec
        sources = [spec.when, *spec.variables.values(), *spec.evidence]
        sources += [o.when for o in spec.severity_overrides]
        sources += [p.when for p in spec.proposals if p.when]
        sources += [spec.blockers] if spec.blockers else []
        for source in sources:
            for match in _NAME_IS.finditer(source):
                names.add(match.group(1) or match.group(2))
            for listed in _NAME_IN.finditer(source):
                names.update(_QUOTED.findall(listed.group(1)))
    return names


def lint_alert_mapping(path: Path, ruleset: RuleSet) -> list[RuleError]:
    """The alert mapping's problems, `file:line: what`, checked against `ruleset`."""
    mapping, problems = read_alert_mapping(path)
    if mapping is None:
        return problems
    try:
        located = load_located(path)
    except InputError as exc:  # read a moment ago: changed or gone since
        return [RuleError(exc.where, exc.message)]
    known = alert_names_read(ruleset)
    rule_ids = {rule.id for rule in ruleset.rules}
    for name, symptom in mapping.symptoms.items():
        if symptom.as_alert is not None and symptom.as_alert not in known:
            problems.append(
                RuleError(
                    located.where(("symptoms", name, "as_alert")),
                    f"symptoms.{name}.as_alert: no rule reads an alert named "
                    f"{symptom.as_alert!r} (use null to make it evidence only); "
                    f"known: {', '.join(sorted(known))}",
                )
            )
        for index, rule_id in enumerate(symptom.rules):
            if rule_id not in rule_ids:
                problems.append(
                    RuleError(
                        located.where(("symptoms", name, "rules", index)),
                        f"symptoms.{name}.rules: no rule {rule_id!r}",
                    )
                )
    first: dict[str, str] = {}
    for index, entry in enumerate(mapping.alerts):
        where = located.where(("alerts", index))
        if not entry.source.strip():
            problems.append(RuleError(where, f"alerts[{index}].source: say where it comes from"))
        for name in entry.names:
            if name in first:
                problems.append(
                    RuleError(
                        where,
                        f"alerts[{index}]: {name} is listed first at {first[name]}, "
                        "which wins: this entry never reads it",
                    )
                )
            else:
                first[name] = where
    return problems
