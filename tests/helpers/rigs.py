"""The executor on the simulated cluster and a SQLite store, with a policy naming an on-call
group and a clock the test moves: what the executor and digest tests build on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config import ActionPolicy, ApprovalPolicy, Remediation, Settings
from bot.evidence.gate import ExternalEvidence
from bot.kube.cluster import KubeCluster
from bot.model import Action, IncidentState
from bot.remediate.executor import Executor
from bot.store.sql import SqlStore
from gpusim.resources import BY_KIND
from tests.helpers.builders import diagnosis

MERGE = "application/merge-patch+json"
POLICY = ApprovalPolicy(
    cordon=ActionPolicy(groups=["gpu-oncall"]),
    drain=ActionPolicy(groups=["gpu-oncall"], two_person=True),
    uncordon=ActionPolicy(groups=["gpu-oncall"]),
    force=ActionPolicy(users=["dave", "erin"], two_person=True),
    uncordon_anyway=ActionPolicy(users=["dave", "erin"], two_person=True),
)
ONCALL = {"alice", "bob", "carol"}


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Rig:
    server: Any
    cluster: KubeCluster
    store: SqlStore
    clock: Clock
    executor: Executor
    incident: str

    def node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.server.store.get(BY_KIND["Node"], "", name)
        return node

    def cordoned(self, name: str) -> bool:
        return bool(self.node(name)["spec"].get("unschedulable"))

    def request(self, action: Action, node: str = "gpu-a3", **options: bool) -> str:
        facts = self.executor.read_facts(node)
        return self.executor.request(
            action, facts.nodes[node], self.incident, "gpubot", **options
        ).id


def make_rig(sim_cluster: Any, tmp_path: Path, **remediation: Any) -> Rig:
    server, cluster = sim_cluster
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    clock = Clock()
    settings = Settings(
        remediation=Remediation(approvals=POLICY, drain_timeout_s=10, **remediation)
    )
    executor = Executor(
        cluster,
        store,
        settings,
        executor_id="test",
        groups_of=lambda user: {"gpu-oncall"} if user in ONCALL else set(),
        clock=clock,
        # Prometheus saw no new GPU errors: the Kubernetes items decide the gate here.
        external=lambda _node: ExternalEvidence(new_gpu_errors=[]),
    )
    incident = store.record_diagnosis("prod", diagnosis(node="gpu-a3"), clock(), 3600).incident
    store.transition(incident.id, IncidentState.DIAGNOSED, "gpubot", clock())
    store.transition(incident.id, IncidentState.AWAITING_APPROVAL, "gpubot", clock())
    return Rig(server, cluster, store, clock, executor, incident.id)
