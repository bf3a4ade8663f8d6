"""What the CEL of a rule sees: the one builder of the variables for each scope.

Diagnosis and `rules lint` both build their contexts here, so what lint checks a rule
against is exactly what the rule meets at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.config import Settings
from bot.model import ClusterFacts, Lang, NodeFacts, PoolFacts, Signal, Stage
from bot.rules.loading import UNDERSTOOD
from bot.rules.schema import XidCatalog
from bot.rules.xids import describe_xids


def settings_context(settings: Settings) -> dict[str, Any]:
    return {**settings.thresholds.model_dump(), "gpu_resource": settings.gpu_resource}


def alert_context(signal: Signal) -> dict[str, Any]:
    """One alert as a rule sees it: `name` is the gpubot alert name the alert mapping read it
    as, `alertname` the one its own rule gave it, `understood` how gpubot read it ("" for
    gpubot's own alerts, read as they are)."""
    return {
        "name": signal.name,
        "alertname": signal.labels.get("alertname") or signal.name,
        "understood": signal.annotations.get(UNDERSTOOD, ""),
        "status": signal.status,
        "gpu": signal.gpu or "",
        "labels": signal.labels,
        "annotations": signal.annotations,
    }


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
        "alerts": [alert_context(a) for a in alerts],
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


def cluster_context(cluster: ClusterFacts, settings: Settings) -> dict[str, Any]:
    return {
        "cluster": {
            "pending_pods": [p.model_dump(mode="json") for p in cluster.pending_pods],
            "offered_resources": cluster.offered_resources,
            "nodes": len(cluster.nodes),
        },
        "settings": settings_context(settings),
    }
