"""Blast radius (docs/architecture.md, invariant 6): how many nodes of one pool may be out of
service at once, whatever was approved.

Out of service means cordoned by anyone (spec.unschedulable) or not Ready: a pool that has
already lost nodes to a hardware fault has less room for maintenance. The budget is the
stricter of a node count and a share of the pool, the share rounded up so that a small pool
can still lose one node (10% of 4 nodes is one node, not none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.config import BlastRadius
from bot.model import ClusterFacts, Lang, NodeFacts
from bot.texts import say


@dataclass(frozen=True)
class BudgetCheck:
    """Whether one more node of a pool may go out now, and the sentence that says why."""

    allowed: bool
    pool: str | None
    out_of_service: list[str]
    budget: int
    reason: str


def out_of_service(node: NodeFacts) -> bool:
    return node.unschedulable or (node.known and node.ready != "True")


def check_budget(
    cluster: ClusterFacts, node: str, limits: BlastRadius, lang: Lang = Lang.EN
) -> BudgetCheck:
    """May `node` be taken out of service now? A node already out counts as taken."""
    facts = cluster.nodes.get(node)
    pool_name = facts.pool if facts else None
    pool = cluster.pools.get(pool_name or "")
    members = [cluster.nodes[n] for n in pool.nodes if n in cluster.nodes] if pool else []
    if facts is None or pool is None or not members:
        # A node of no known pool is its own pool of one: the count limit alone applies.
        members = [facts] if facts else []
    budget = min(limits.max_nodes, math.ceil(limits.max_share * len(members)))
    out = sorted(m.name for m in members if out_of_service(m))
    if node in out:
        already = say(lang, "budget.already_out", node=node)
        return BudgetCheck(True, pool_name, out, budget, already)
    if len(out) + 1 > budget:
        reason = say(
            lang,
            "budget.refused",
            pool=pool_name or node,
            budget=budget,
            members=len(members),
            out=", ".join(out) or "-",
        )
        return BudgetCheck(False, pool_name, out, budget, reason)
    within = say(lang, "budget.within", n=len(out) + 1, budget=budget)
    return BudgetCheck(True, pool_name, out, budget, within)
