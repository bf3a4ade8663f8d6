"""What the CEL of a rule sees: the one builder of the variables for each scope.

Diagnosis and `rules lint` both build their contexts here, so what lint checks a rule
against is exactly what the rule meets at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.config import Settings
from bot.model import ClusterFacts, Lang, NodeFacts, PoolFacts, Signal, Stage
from bot.rules.loading import EVIDENCE_ONLY, UNDERSTOOD
from bot.rules.schema import XidCatalog
from bot.rules.xids import describe_xids


def settings_context(settings: Settings) -> dict[str, Any]:
    return {**settings.thresholds.model_dump(), "gpu_resource": settings.gpu_resource}


ALERTS_PER_NODE = 64
"""At most this many (aggregated) alerts per node reach a rule. cel-cpp stops an evaluation
after about 10,000 comprehension steps; 64 keeps a rule comparing every pair of a node's
alerts (64 × 64 = 4,096 steps) well inside that, whatever Alertmanager sends."""


def alert_context(signal: Signal, count: int = 1) -> dict[str, Any]:
    """One alert as a rule sees it: `name` is the gpubot alert name the alert mapping read it
    as, `alertname` the one its own rule gave it, `understood` how gpubot read it ("" for
    gpubot's own alerts, read as they are), `count` how many firing alerts of the node it
    stands for (see `aggregated_alerts`)."""
    return {
        "name": signal.name,
        "alertname": signal.labels.get("alertname") or signal.name,
        "understood": signal.annotations.get(UNDERSTOOD, ""),
        "status": signal.status,
        "gpu": signal.gpu or "",
        "labels": signal.labels,
        "annotations": signal.annotations,
        "count": count,
    }


def _same_alert(signal: Signal) -> tuple[object, ...]:
    """What tells one alert of a node from another for a rule: its names, how it was read,
    its GPU and its Xid. An alert naming no GPU keeps its labels in the key, so two such
    alerts about different GPUs (told apart only by their labels) stay two."""
    return (
        signal.name,
        signal.labels.get("alertname") or signal.name,
        signal.annotations.get(UNDERSTOOD, ""),
        signal.status,
        signal.gpu or "",
        signal.labels.get("xid", ""),
        None if signal.gpu else tuple(sorted(signal.labels.items())),
    )


def aggregated_alerts(alerts: list[Signal]) -> list[dict[str, Any]]:
    """A node's alerts as its rules see them: one entry per alertname, GPU and Xid with the
    `count` of alerts it stands for (the first one's labels and annotations), at most
    `ALERTS_PER_NODE` entries. Alerts some rule reads come before those only shown as
    "also firing", then the most numerous: 5,000 firing alerts on a node cost a rule no more
    than a handful, and cannot stop its evaluation (or the Xid it should see)."""
    groups: dict[tuple[object, ...], list[Signal]] = {}
    for signal in alerts:
        groups.setdefault(_same_alert(signal), []).append(signal)
    # A signal may already stand for many alerts (`Signal.count`: the store reads one per kind).
    counted = [(same, sum(s.count for s in same)) for same in groups.values()]
    ranked = sorted(
        counted,
        key=lambda group: (group[0][0].annotations.get(EVIDENCE_ONLY) == "true", -group[1]),
    )
    return [alert_context(same[0], count) for same, count in ranked[:ALERTS_PER_NODE]]


def node_pool_context(pool: PoolFacts | None) -> dict[str, Any]:
    """The `pool` a node rule sees: its pool's facts with `size`, the number of its nodes, in
    place of their names. Built once per pool and shared by its nodes: with the names, every
    node's context carried the whole pool and converting it grew as nodes squared."""
    if pool is None:
        return {}
    view = pool.model_dump(mode="json", exclude={"nodes"})
    view["size"] = len(pool.nodes)
    return view


def node_context(
    node: NodeFacts,
    stage: Stage,
    alerts: list[Signal],
    catalog: XidCatalog | None,
    pool: Mapping[str, Any],
    settings: Settings,
    lang: Lang,
    findings: list[str] | None = None,
) -> dict[str, Any]:
    """`pool`: `node_pool_context` of the node's pool."""
    facts = node.model_dump(mode="json")
    facts["stage"] = stage.value
    if node.gpu is not None:
        facts["gpu"]["expected"] = node.gpu.expected
    return {
        "node": facts,
        "alerts": aggregated_alerts(alerts),
        "xids": describe_xids(node.xids, catalog, lang),
        "pool": pool,
        "settings": settings_context(settings),
        "findings": findings or [],
    }


def pool_context(
    pool: PoolFacts, findings: Mapping[str, int], widespread: list[str], settings: Settings
) -> dict[str, Any]:
    return {
        "pool": {
            **pool.model_dump(mode="json"),
            "size": len(pool.nodes),
            "findings": dict(findings),
            "widespread": widespread,
        },
        "settings": settings_context(settings),
    }


def known_nodes(cluster: ClusterFacts) -> int:
    """The nodes the cluster has: a node only alerts name (`NodeFacts.known` false, such as a
    look-alike of a real node's name) is none of them, and counts nowhere."""
    return sum(1 for node in cluster.nodes.values() if node.known)


def cluster_context(cluster: ClusterFacts, settings: Settings) -> dict[str, Any]:
    return {
        "cluster": {
            "pending_pods": [p.model_dump(mode="json") for p in cluster.pending_pods],
            "offered_resources": cluster.offered_resources,
            "nodes": known_nodes(cluster),
        },
        "settings": settings_context(settings),
    }
