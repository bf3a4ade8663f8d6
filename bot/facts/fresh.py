"""A node's facts read afresh from the live API, for a decision about it: the proposals, the
check before an action, the health gate, `/gpubot status`.

Why it exists: a decision must rest on the node as it is now, not on the last pass (which
may be minutes old, and about other nodes), and every part that decides reads it the same
way. What it must never do: cache (a second call reads again), or read more than the
decision compares (the check before a cordon reads the node list and nothing else).
"""

from __future__ import annotations

from bot.clock import Clock
from bot.config import Settings
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot, read_to_take_out
from bot.facts.snapshots import Snapshot
from bot.facts.taking_out import take_out_facts
from bot.model import Action, ClusterFacts
from bot.ports import Cluster, SignalStore


class FreshFacts:
    """Owns nothing: the cluster, the store's firing alerts and the clock it reads with.
    Never: decides anything from what it reads."""

    def __init__(
        self, cluster: Cluster, alerts: SignalStore, settings: Settings, clock: Clock
    ) -> None:
        self.cluster = cluster
        self.alerts = alerts
        self.settings = settings
        self.clock = clock

    def of_node(self, node: str) -> ClusterFacts:
        """The node as it is now, with the alerts firing on it (an Xid still firing keeps the
        health gate shut here as it does in the rules)."""
        snapshot = read_snapshot(self.cluster, node)
        firing = self.alerts.firing_alerts(node)
        return collect_facts(snapshot, firing, self.settings, self.clock())

    def to_take_out(self, node: str, action: Action) -> tuple[Snapshot, ClusterFacts]:
        """For the check before a cordon or drain: the node's own facts and its pool's
        cordons and readiness (`bot.facts.taking_out`), from the node list, and for a drain
        the node's pods (`bot.facts.live.read_to_take_out`)."""
        snapshot = read_to_take_out(self.cluster, node, pods=action is Action.DRAIN)
        return snapshot, take_out_facts(snapshot, node, self.settings, self.clock())
