"""Facts + rules -> diagnoses: which symptom, at which lifecycle stage, what to do about it.

Three passes, in this order because each needs the one before: node rules (then the node
rules that look at what else fired on the node), pool rules (which count node findings),
cluster rules. The four questions are answered here from the facts, never taken from a rule.
Every sentence it adds is the catalogue's (`diagnosis.*`, bot/texts/diagnosis_texts.py):
it must never write one of its own, or a `--lang zh` diagnosis reads half in English.

One module (about 600 lines) because the passes share one set of matches and one halting
decision (a pool-wide failure withdraws node proposals): split, the order they depend on
would live in the call sites instead of here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.config import Settings
from bot.errors import RuleError
from bot.facts.nodes import absent_line
from bot.model import (
    Action,
    Blocker,
    ClusterFacts,
    Diagnosis,
    Lang,
    NodeFacts,
    PoolFacts,
    Proposal,
    Questions,
    RunbookStep,
    Signal,
    Stage,
)
from bot.rules.commands import fill
from bot.rules.contexts import (
    cluster_context,
    known_nodes,
    node_context,
    node_pool_context,
    pool_context,
)
from bot.rules.loading import EVIDENCE_ONLY, SYMPTOM, CompiledRule, RuleSet
from bot.rules.matching import MatchResult, RuleMatch, match, suppress
from bot.texts import say

_MIG_IN_PROGRESS = {"pending", "rebooting"}


def _replacing_the_driver(node: NodeFacts) -> bool:
    """A driver pod younger than GPU work still running, that cannot unload the old driver:
    a driver rollout under way, whatever the upgrade label says (it may still read
    upgrade-done from the last one, when the rollout bypassed the upgrade controller)."""
    driver = node.components.get("nvidia-driver-daemonset")
    if driver is None or driver.gpu_error != "driver-in-use":
        return False
    pod = next((p for p in node.pods if p.name == driver.pod), None)
    return pod is not None and any(
        p.gpu_request > 0 and p.phase == "Running" and p.age_s > pod.age_s for p in node.pods
    )


def infer_stage(node: NodeFacts, settings: Settings) -> Stage:
    """The runbook's step 1, from labels, taints, events and age; most specific first."""
    limits = settings.thresholds
    # mig-manager also switches the gpu.deploy.* labels off while it works, but those labels
    # alone can mean a standalone device plugin: only the config state says "reconfiguring".
    if node.mig_state in _MIG_IN_PROGRESS:
        return Stage.MIG
    if node.upgrade_state and node.upgrade_state != "upgrade-done":
        return Stage.UPGRADE
    if _replacing_the_driver(node):
        return Stage.UPGRADE
    if node.since_reboot_s is not None and node.since_reboot_s < limits.reboot_window_s:
        return Stage.REBOOT
    if node.unschedulable:
        return Stage.DRAIN
    if node.since_uncordon_s is not None and node.since_uncordon_s < limits.rejoin_window_s:
        return Stage.REJOIN
    if node.age_s is not None and node.age_s < limits.join_window_s:
        return Stage.JOIN
    return Stage.STEADY


@dataclass(frozen=True)
class _Matched:
    facts: NodeFacts
    alerts: list[Signal]
    matches: list[RuleMatch]
    errors: list[RuleError]


class NodeMatches:
    """Node rule matches kept from one pass to the next. A node whose facts are the very
    object matched before (reused by `collect_facts`, not found again) and whose alerts are
    the same is not matched again: in a pass about one node, the other nodes' matches only
    count toward the pool rules, and matching them is most of a pass's time."""

    def __init__(self) -> None:
        self._by_node: dict[str, _Matched] = {}

    def get(self, name: str, facts: NodeFacts, alerts: list[Signal]) -> _Matched | None:
        kept = self._by_node.get(name)
        if kept is None or kept.facts is not facts or kept.alerts != alerts:
            return None
        return kept

    def put(self, name: str, kept: _Matched) -> None:
        self._by_node[name] = kept

    def keep_only(self, names: Collection[str]) -> None:
        for gone in self._by_node.keys() - set(names):
            del self._by_node[gone]

    def clear(self) -> None:
        self._by_node.clear()


@dataclass
class DiagnoseResult:
    diagnoses: list[Diagnosis] = field(default_factory=list)
    errors: list[RuleError] = field(default_factory=list)


def diagnose(
    cluster: ClusterFacts,
    signals: list[Signal],
    rules: RuleSet,
    settings: Settings,
    lang: Lang | None = None,
    only_nodes: Collection[str] | None = None,
    earlier: NodeMatches | None = None,
) -> DiagnoseResult:
    """Every rule over every node (pool-wide rules need them all); with `only_nodes`, the
    node diagnoses are written out only for those nodes (pool and cluster ones always):
    building a diagnosis — questions, scope, runbook text — costs more than matching."""
    lang = lang or settings.lang
    result = DiagnoseResult()
    firing = [s for s in signals if s.status == "firing"]
    alerts_by_node: dict[str, list[Signal]] = defaultdict(list)
    for signal in firing:
        if signal.node:
            alerts_by_node[signal.node].append(signal)

    node_rules = [r for r in rules.rules if r.spec.scope == "node" and not r.spec.after_node_rules]
    later_rules = [r for r in rules.rules if r.spec.scope == "node" and r.spec.after_node_rules]
    matches: list[RuleMatch] = []
    stages: dict[str, Stage] = {}
    pools = {name: node_pool_context(pool) for name, pool in cluster.pools.items()}
    for name in sorted(cluster.nodes):
        node = cluster.nodes[name]
        stage = infer_stage(node, settings)
        stages[name] = stage
        alerts = alerts_by_node.get(name, [])
        kept = earlier.get(name, node, alerts) if earlier is not None else None
        if kept is None:
            its_pool = pools.get(node.pool or "", {})
            kept = _match_node(
                name,
                node,
                stage,
                alerts,
                (node_rules, later_rules),
                its_pool,
                rules,
                settings,
                lang,
            )
            if earlier is not None:
                earlier.put(name, kept)
        result.errors.extend(kept.errors)
        matches.extend(kept.matches)
    if earlier is not None:
        earlier.keep_only(cluster.nodes)

    widespread = _widespread(cluster, matches, settings)
    pool_matches = _pool_pass(cluster, matches, stages, widespread, rules, settings, result)
    cluster_matches = _cluster_pass(cluster, rules, settings, result)
    halted = {
        (m.subject, rule_id)
        for m in pool_matches
        if m.rule.spec.halts_node_remediation
        for rule_id in widespread.get(m.subject or "", [])
    }

    scope = _ScopeIndex(cluster, matches)
    for hit in (*matches, *pool_matches, *cluster_matches):
        if (
            only_nodes is not None
            and hit.rule.spec.scope == "node"
            and hit.subject not in only_nodes
        ):
            continue
        subject = cluster.nodes.get(hit.subject or "") if hit.rule.spec.scope == "node" else None
        pool = subject.pool if subject else (hit.subject if hit.rule.spec.scope == "pool" else None)
        halt = subject is not None and (pool, hit.rule.id) in halted
        result.diagnoses.append(
            _diagnosis(hit, subject, pool, cluster, scope, lang, settings, halt, alerts_by_node)
        )
    result.diagnoses.sort(key=lambda d: (-d.severity.rank, d.node or "", d.rule))
    return result


def _match_node(
    name: str,
    node: NodeFacts,
    stage: Stage,
    alerts: list[Signal],
    rule_sets: tuple[list[CompiledRule], list[CompiledRule]],
    pool: Mapping[str, Any],
    rules: RuleSet,
    settings: Settings,
    lang: Lang,
) -> _Matched:
    """The node rules on one node, then those that look at what else fired on it."""
    node_rules, later_rules = rule_sets
    errors = DiagnoseResult()
    context = node_context(node, stage, alerts, rules.xid_catalog, pool, settings, lang)
    found = _collect(match(node_rules, context, name, stage), errors)
    findings = [m.rule.id for m in found if not m.expected and m.severity.rank > 0]
    if findings and later_rules:
        context["findings"] = findings
        found = suppress(found + _collect(match(later_rules, context, name, stage), errors))
    return _Matched(node, alerts, found, errors.errors)


def _collect(found: MatchResult, result: DiagnoseResult) -> list[RuleMatch]:
    result.errors.extend(found.errors)
    return found.matches


def _widespread(
    cluster: ClusterFacts, matches: list[RuleMatch], settings: Settings
) -> dict[str, list[str]]:
    """Per pool, the node rules firing on enough of its nodes to call it a pool problem."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for found in matches:
        node = cluster.nodes.get(found.subject or "")
        if node and node.pool and not found.expected and found.severity.rank > 0:
            counts[node.pool][found.rule.id] += 1
    limits = settings.thresholds
    widespread: dict[str, list[str]] = {}
    for pool, by_rule in counts.items():
        size = len(cluster.pools[pool].nodes) if pool in cluster.pools else 0
        widespread[pool] = sorted(
            rule_id
            for rule_id, count in by_rule.items()
            if count >= limits.pool_wide_min_nodes
            and size
            and count / size >= limits.pool_wide_min_share
        )
    return widespread


def _pool_pass(
    cluster: ClusterFacts,
    matches: list[RuleMatch],
    stages: Mapping[str, Stage],
    widespread: Mapping[str, list[str]],
    rules: RuleSet,
    settings: Settings,
    result: DiagnoseResult,
) -> list[RuleMatch]:
    pool_rules = [r for r in rules.rules if r.spec.scope == "pool"]
    if not pool_rules:
        return []
    findings: dict[str, Counter[str]] = defaultdict(Counter)
    for found in matches:
        node = cluster.nodes.get(found.subject or "")
        if node and node.pool and not found.expected:
            findings[node.pool][found.rule.id] += 1
    found_all: list[RuleMatch] = []
    for name in sorted(cluster.pools):
        pool = cluster.pools[name]
        member_stages = Counter(stages[n] for n in pool.nodes if n in stages)
        stage = member_stages.most_common(1)[0][0] if member_stages else Stage.STEADY
        context = pool_context(
            pool, findings.get(name, Counter()), widespread.get(name, []), settings
        )
        found_all += _collect(match(pool_rules, context, name, stage), result)
    return found_all


def _cluster_pass(
    cluster: ClusterFacts, rules: RuleSet, settings: Settings, result: DiagnoseResult
) -> list[RuleMatch]:
    cluster_rules = [r for r in rules.rules if r.spec.scope == "cluster"]
    context = cluster_context(cluster, settings)
    found_all: list[RuleMatch] = []
    for rule in cluster_rules:
        stage = rule.spec.stage or Stage.STEADY
        found_all += _collect(match([rule], context, None, stage), result)
    return suppress(found_all)


class _ScopeIndex:
    """How many nodes show each symptom, by pool and in all (question 4): nodes the cluster
    has, never one only alerts name (`NodeFacts.known` false)."""

    def __init__(self, cluster: ClusterFacts, matches: list[RuleMatch]) -> None:
        self.by_pool_rule: Counter[tuple[str, str]] = Counter()
        self.by_rule: Counter[str] = Counter()
        self.troubled_nodes: dict[str, set[str]] = defaultdict(set)
        for found in matches:
            node = cluster.nodes.get(found.subject or "")
            if node is not None and not node.known:
                continue
            self.by_rule[found.rule.id] += 1
            if node and node.pool:
                self.by_pool_rule[(node.pool, found.rule.id)] += 1
                if not found.expected:
                    self.troubled_nodes[node.pool].add(node.name)


def _node_questions(
    node: NodeFacts,
    rule_id: str,
    cluster: ClusterFacts,
    scope: _ScopeIndex,
    lang: Lang,
    settings: Settings,
) -> Questions:
    if not node.known:
        unknown = say(lang, "diagnosis.unknown_node")
        return Questions(
            registered=unknown,
            gpu_visible=unknown,
            workloads=_pending_summary(cluster, lang).lstrip("；; "),
            scope=say(lang, "diagnosis.scope_absent", n=scope.by_rule[rule_id]),
        )
    if node.ready == "True":
        registered = say(
            lang,
            "diagnosis.registered_yes",
            kubelet=node.kubelet_version or "?",
            runtime=node.runtime_version or "?",
        )
        other = [
            f"{kind}={status}"
            for kind, status in sorted(node.conditions.items())
            if kind != "Ready" and status == "True"
        ]
        if other:
            registered += say(lang, "diagnosis.registered_other", conds=", ".join(other))
    else:
        message = node.condition_messages.get("Ready", "")
        registered = say(
            lang,
            "diagnosis.registered_no",
            ready=node.ready or "Unknown",
            msg=f" ({message})" if message else "",
        )

    gpu = node.gpu
    if not node.gpu_node or gpu is None:
        gpu_visible = say(lang, "diagnosis.not_gpu")
    else:
        all_seen = gpu.allocatable >= gpu.expected and gpu.expected
        gpu_visible = say(
            lang,
            "diagnosis.gpu_yes" if all_seen else "diagnosis.gpu_no",
            alloc=gpu.allocatable,
            expected=gpu.expected,
            res=settings.gpu_resource,
        )
        if gpu.mig_allocatable:
            mig = ", ".join(
                f"{k.removeprefix('nvidia.com/')}={v}" for k, v in gpu.mig_allocatable.items()
            )
            gpu_visible += "; " + say(lang, "diagnosis.gpu_mig", mig=mig)
        failing = [
            f"{c.pod} {c.waiting_reason or 'failing'} ({c.restarts} restarts)"
            for c in node.components.values()
            if c.failing
        ]
        if failing:
            gpu_visible += say(lang, "diagnosis.gpu_failing", comps=", ".join(failing))
        absent = [
            name for name, c in node.components.items() if not c.present and c.deploy_label is True
        ]
        if absent:
            gpu_visible += say(lang, "diagnosis.gpu_absent", comps=", ".join(absent))

    if node.unschedulable:
        if node.cordoned_for_s is not None:
            workloads = say(
                lang,
                "diagnosis.wl_cordoned",
                mins=node.cordoned_for_s // 60,
                remaining=node.remaining_pods,
            )
        else:
            workloads = say(lang, "diagnosis.wl_cordoned_unknown", remaining=node.remaining_pods)
        real = [b for b in node.blockers if b.kind != "daemonset"]
        if real:
            workloads += say(
                lang,
                "diagnosis.wl_blockers",
                blockers=", ".join(f"{b.namespace}/{b.pod}: {b.kind}" for b in real[:5]),
            )
    else:
        gpu_pods = sum(1 for p in node.pods if p.gpu_request and p.phase == "Running")
        workloads = say(lang, "diagnosis.wl_running", gpu_pods=gpu_pods)
    workloads += _pending_summary(cluster, lang)

    if node.pool and node.pool in cluster.pools:
        pool = cluster.pools[node.pool]
        scope_text = say(
            lang,
            "diagnosis.scope_pool",
            n=scope.by_pool_rule[(node.pool, rule_id)],
            size=len(pool.nodes),
            pool=node.pool,
        )
        if len(pool.driver_versions) > 1:
            scope_text += say(lang, "diagnosis.scope_drivers", drivers=_drivers(pool))
    else:
        scope_text = say(lang, "diagnosis.scope_node")
    return Questions(
        registered=registered, gpu_visible=gpu_visible, workloads=workloads, scope=scope_text
    )


def _drivers(pool: PoolFacts) -> str:
    return ", ".join(f"{v} ×{n}" for v, n in sorted(pool.driver_versions.items()))


def _pending_summary(cluster: ClusterFacts, lang: Lang) -> str:
    pods = cluster.pending_pods
    if not pods:
        return say(lang, "diagnosis.wl_none_pending")
    reasons: Counter[str] = Counter()
    for pod in pods:
        for reason in pod.reasons or []:
            reasons[reason.kind] += 1
    text = ", ".join(f"{kind} ×{n}" for kind, n in reasons.most_common()) or "?"
    return say(lang, "diagnosis.wl_pending", n=len(pods), reasons=text)


def _pool_questions(
    pool_name: str, cluster: ClusterFacts, scope: _ScopeIndex, lang: Lang, settings: Settings
) -> Questions:
    pool = cluster.pools[pool_name]
    members = [cluster.nodes[n] for n in pool.nodes if n in cluster.nodes]
    ready = sum(1 for n in members if n.ready == "True")
    alloc = sum(n.gpu.allocatable for n in members if n.gpu)
    expected = sum(n.gpu.expected for n in members if n.gpu)
    scope_text = say(
        lang,
        "diagnosis.scope_pool_findings",
        n=len(scope.troubled_nodes.get(pool_name, ())),
        size=len(pool.nodes),
        pool=pool_name,
    )
    if len(pool.driver_versions) > 1:
        scope_text += say(lang, "diagnosis.scope_drivers", drivers=_drivers(pool))
    return Questions(
        registered=say(lang, "diagnosis.pool_registered", ready=ready, size=len(members)),
        gpu_visible=say(
            lang, "diagnosis.pool_gpu", alloc=alloc, expected=expected, res=settings.gpu_resource
        ),
        workloads=_pending_summary(cluster, lang).lstrip("；; "),
        scope=scope_text,
    )


def _cluster_questions(cluster: ClusterFacts, lang: Lang) -> Questions:
    pods = cluster.pending_pods
    namespaces = {p.namespace for p in pods}
    gpu_resources = [r for r in cluster.offered_resources if r.startswith("nvidia.com/")]
    return Questions(
        registered=say(lang, "diagnosis.cluster_registered", nodes=known_nodes(cluster)),
        gpu_visible=say(lang, "diagnosis.cluster_gpu", res=", ".join(gpu_resources) or "-"),
        workloads=_pending_summary(cluster, lang).lstrip("；; "),
        scope=say(lang, "diagnosis.cluster_scope", n=len(pods), ns=len(namespaces)),
    )


ALSO_FIRING_MAX = 5
"""Alerts no rule reads, shown by name on a node's diagnosis; more are counted."""
_ALSO_FIRING_TEXT = 160


def _would_block_a_drain(found: RuleMatch, node: NodeFacts | None) -> list[Blocker]:
    """What a proposed drain would meet, read with the diagnosis: each budget that allows no
    disruption (with its disruptionsAllowed), emptyDir data, pods nothing recreates. Said
    before anyone approves, not found out when the drain stalls on 429s. Budgets first: a
    message shows only so many blockers, and a budget is what stalls a drain with no flag
    to get past it."""
    if node is None or not any(action is Action.DRAIN for action, _ in found.actions):
        return []
    return sorted(
        (b for b in node.blockers if b.kind != "daemonset"), key=lambda b: b.kind != "pdb"
    )


def _also_firing(alerts: list[Signal], lang: Lang) -> list[str]:
    """A line `also firing: <alertname> (<summary>)` for each alert on the node that no rule
    reads (`gpubot.evidence_only`: the alert mapping knows nothing of it, its symptom has no
    gpubot alert yet, or it is an Xid alert without its code).

    Why here, once, and not in each rule: such an alert never opens an incident or proposes
    anything by itself (gpubot cannot judge it), yet the on-call should see that it fires on
    the node whose diagnosis they read. Every rule would have to repeat the same line; here it
    follows every node diagnosis, whatever rule made it, including rules written later."""
    lines: list[str] = []
    shown: set[tuple[str, str | None, str]] = set()
    hidden = 0
    for alert in alerts:
        if alert.annotations.get(EVIDENCE_ONLY) != "true":
            continue
        name = alert.labels.get("alertname") or alert.name
        said = alert.annotations.get("summary") or alert.annotations.get("description") or ""
        said = " ".join(said.split())
        if len(said) > _ALSO_FIRING_TEXT:
            said = said[: _ALSO_FIRING_TEXT - 1] + "…"
        key = (name, alert.gpu, said)
        if key in shown:
            continue
        shown.add(key)
        if len(lines) >= ALSO_FIRING_MAX:
            hidden += 1
            continue
        text = f" ({said})" if said else ""
        symptom = alert.annotations.get(SYMPTOM, "unknown")
        if symptom != "unknown":
            text += say(lang, "diagnosis.also_read_as", symptom=symptom)
        gpu = f" GPU {alert.gpu}" if alert.gpu else ""
        lines.append(say(lang, "diagnosis.also_firing", alert=f"{name}{gpu}", text=text))
    if hidden:
        lines.append(say(lang, "diagnosis.also_more", n=hidden))
    return lines


def _diagnosis(
    found: RuleMatch,
    node: NodeFacts | None,
    pool: str | None,
    cluster: ClusterFacts,
    scope: _ScopeIndex,
    lang: Lang,
    settings: Settings,
    halted: bool,
    alerts_by_node: Mapping[str, list[Signal]],
) -> Diagnosis:
    spec = found.rule.spec
    if node is not None:
        questions = _node_questions(node, spec.id, cluster, scope, lang, settings)
    elif spec.scope == "pool" and pool:
        questions = _pool_questions(pool, cluster, scope, lang, settings)
    else:
        questions = _cluster_questions(cluster, lang)
    evidence = list(found.evidence)
    if found.expected and spec.expected is not None:
        evidence.insert(0, say(lang, "diagnosis.expected", note=spec.expected.note(lang)))
    # A node only alerts name: its name is an alert label's text, not a node anyone can act
    # on. It is said to be absent; its runbook keeps the steps' words, with no command, and
    # nothing is proposed for it.
    absent = node is not None and not node.known
    proposals = [
        Proposal(
            action=action,
            node=node.name if node else None,
            requires_approval=action is not Action.NONE,
            force=force,
        )
        for action, force in found.actions
    ]
    if halted:
        evidence.append(say(lang, "diagnosis.halted", pool=pool))
    if halted or absent:
        proposals = [
            Proposal(action=Action.NONE, node=node.name if node else None, requires_approval=False)
        ]
    namespace = settings.operator_namespaces[0] if settings.operator_namespaces else "default"
    signals = [s.fingerprint for s in alerts_by_node.get(node.name if node else "", [])]
    if node is not None:
        if absent:
            evidence.insert(0, absent_line(node.name, lang))
        evidence += _also_firing(alerts_by_node.get(node.name, []), lang)
    return Diagnosis(
        rule=spec.id,
        node=node.name if node else None,
        pool=pool,
        stage=found.stage,
        severity=found.severity,
        title=spec.title(lang),
        summary=spec.diagnosis(lang),
        causes=spec.causes(lang),
        check_first=spec.check_first(lang),
        questions=questions,
        evidence=evidence,
        blockers=found.blockers or _would_block_a_drain(found, node),
        runbook=[
            RunbookStep(
                text=step.text(lang),
                commands=[] if absent else [fill(c, node, namespace) for c in step.commands],
            )
            for step in spec.runbook
        ],
        rollback=spec.rollback(lang),
        proposals=proposals,
        expected=found.expected,
        lang=lang,
        signals=signals,
    )
