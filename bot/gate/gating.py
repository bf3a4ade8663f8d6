"""The health gate as one gpubot process enforces it: `health_gate` over a node's facts, with
the evidence the Kubernetes API cannot give (new GPU errors from Prometheus, later deep
checks) and, when the settings ask for it, the GPU smoke-test pod.

Why it exists: the executor (before an uncordon), the proposals (before offering one) and
the follow-up after a repair must get the same answer for the same node, from one object
that knows where the evidence comes from. What it must never do: open the gate on evidence
it could not get (that is "unknown"), or act on the node (it only judges; a smoke-test pod is
a check, run and deleted by `bot.gate.smoke_test`).
"""

from __future__ import annotations

from collections.abc import Callable

from bot.clock import Clock
from bot.config import Settings
from bot.gate.items import ExternalEvidence, GateResult, health_gate
from bot.gate.smoke_test import SmokeTests
from bot.model import ClusterFacts, NodeFacts
from bot.ports import Cluster

Evidence = Callable[[str], ExternalEvidence]
"""node → what Prometheus (and later the deep checks) say of it; nobody looked: all None."""


class HealthGate:
    """Owns where a node's outside evidence comes from and the process's smoke tests (their
    results are kept per node for `max_age_s`). Never: judges a node without every item the
    settings require, or remembers a verdict (the node is judged afresh at every call)."""

    def __init__(
        self,
        cluster: Cluster,
        settings: Settings,
        clock: Clock,
        external: Evidence = lambda _node: ExternalEvidence(),
    ) -> None:
        self.gpu_resource = settings.gpu_resource
        self.external = external
        smoke = settings.remediation.smoke_test
        self.smoke_tests = SmokeTests(cluster, smoke, clock) if smoke.enabled else None

    def judge(self, node: NodeFacts, facts: ClusterFacts) -> GateResult:
        """May `node` go back into service, as `facts` (just read) and the evidence show it?"""
        evidence = self.external(node.name)
        if self.smoke_tests is not None:
            return self.smoke_tests.gate(node, facts, evidence, self.gpu_resource)
        return health_gate(node, facts.pools, evidence, self.gpu_resource)
