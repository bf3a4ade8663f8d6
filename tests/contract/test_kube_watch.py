"""Live watches against the simulator through the real client: signals, dropped streams, 410."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from bot.kube.cluster import KubeCluster
from bot.model import Signal
from bot.sources.trimmed import NodeState, node_state
from bot.sources.watches import Informer, KubeSignals, node_signals
from gpusim import faults
from gpusim.apiserver import SimulatedApiServer
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState

MERGE = "application/merge-patch+json"
Sim = tuple[Any, KubeCluster]


def _ready(store: ClusterState, node: str, status: str) -> None:
    current = store.get(BY_KIND["Node"], "", node)
    conditions = [
        {**c, "status": status} if c["type"] == "Ready" else c
        for c in current["status"]["conditions"]
    ]
    store.patch(BY_KIND["Node"], "", node, MERGE, {"status": {"conditions": conditions}})


def _collect(cluster: KubeCluster, **kwargs: Any) -> tuple[KubeSignals, list[Signal]]:
    seen: list[Signal] = []
    lock = threading.Lock()

    def emit(signal: Signal) -> None:
        with lock:
            seen.append(signal)

    watcher = KubeSignals(cluster, emit, **kwargs).start()
    assert watcher.wait_synced()
    return watcher, seen


def _wait_for(seen: list[Signal], predicate: Any, timeout_s: float = 10) -> list[Signal]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hits = [s for s in list(seen) if predicate(s)]
        if hits:
            return hits
        time.sleep(0.05)
    raise AssertionError(f"no such signal in {[(s.name, s.node) for s in seen]}")


def test_node_transitions_become_signals(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    watcher, seen = _collect(cluster)
    try:
        assert seen == []  # a healthy cluster says nothing on start
        _ready(server.store, "gpu-a1", "False")
        [down] = _wait_for(seen, lambda s: s.name == "NodeNotReady")
        assert (down.node, down.labels["from"], down.labels["to"]) == ("gpu-a1", "True", "False")
        _ready(server.store, "gpu-a1", "True")
        [up] = _wait_for(seen, lambda s: s.name == "NodeReady")
        assert up.status == "resolved"
        faults.inject(server.store, "reboot", "gpu-a2", datetime.now(UTC))
        [reboot] = _wait_for(seen, lambda s: s.name == "NodeRebooted")
        assert reboot.node == "gpu-a2" and reboot.labels["from"] != reboot.labels["to"]
        faults.inject(server.store, "plugin-crashloop", "gpu-a3", datetime.now(UTC))
        [crash] = _wait_for(seen, lambda s: s.name == "PodCrashLoopBackOff")
        assert crash.node == "gpu-a3" and crash.labels["app"] == "nvidia-device-plugin-daemonset"
        [gpus] = _wait_for(seen, lambda s: s.name == "GPUAllocatableChanged" and s.node == "gpu-a3")
        assert (gpus.labels["from"], gpus.labels["to"]) == ("8", "0")
    finally:
        watcher.stop()


def test_failed_scheduling_of_a_gpu_pod(sim_cluster: Sim) -> None:
    from gpusim import objects

    server, cluster = sim_cluster
    watcher, seen = _collect(cluster)
    try:
        now = datetime.now(UTC)
        pending = objects.pod("infer-0", "ml", None, now, gpus=8)
        server.store.create(BY_KIND["Pod"], "ml", pending)
        deadline = time.monotonic() + 10  # the pod informer sees it first, as in a cluster
        while ("ml", "infer-0") not in watcher.gpu_pods and time.monotonic() < deadline:
            time.sleep(0.05)
        event = objects.event(
            "Pod",
            "infer-0",
            "ml",
            "FailedScheduling",
            "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "4 Insufficient nvidia.com/gpu.",
            now,
            component="default-scheduler",
            type_="Warning",
        )
        server.store.create(BY_KIND["Event"], "ml", event)
        [signal] = _wait_for(seen, lambda s: s.name == "GPUPodUnschedulable")
        assert (
            signal.labels["pod"] == "infer-0"
            and "Insufficient nvidia.com/gpu" in signal.labels["message"]
        )
    finally:
        watcher.stop()


def test_no_transition_is_lost_when_streams_keep_ending(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    seen: list[Signal] = []
    informer = Informer(
        cluster,
        "Node",
        lambda old, new: seen.extend(node_signals(old, new, datetime.now(UTC))),
        project=node_state,
        watch_timeout_s=1,  # the server ends every stream after a second
    ).start()
    try:
        deadline = time.monotonic() + 10
        while not informer.relists and time.monotonic() < deadline:
            time.sleep(0.05)
        for flip in range(6):
            _ready(server.store, "gpu-a4", "False" if flip % 2 == 0 else "True")
            time.sleep(0.45)
        _wait_for(seen, lambda s: sum(x.name in ("NodeNotReady", "NodeReady") for x in seen) >= 6)
        names = [s.name for s in seen if s.node == "gpu-a4"]
        assert names == ["NodeNotReady", "NodeReady"] * 3
    finally:
        informer.stop()


def test_a_410_relists_and_reports_what_changed_meanwhile() -> None:
    store = ClusterState(history=50)
    store.load(healthy_cluster(2, datetime.now(UTC))["items"])
    server = SimulatedApiServer(store).start()
    cluster = KubeCluster.for_url(server.url)
    changes: list[tuple[str, str]] = []

    def handler(old: NodeState | None, new: NodeState | None) -> None:
        if old is not None and new is not None:
            changes.append((new.name, dict(new.gpus).get("nvidia.com/gpu", "")))

    informer = Informer(cluster, "Node", handler, project=node_state, watch_timeout_s=1)
    try:
        informer.sync()
        relists = informer.relists
        # While nobody watches, the history moves on past the informer's version.
        store.patch(
            BY_KIND["Node"],
            "",
            "gpu-a1",
            MERGE,
            {"status": {"allocatable": {"nvidia.com/gpu": "5"}}},
        )
        for i in range(80):
            store.patch(
                BY_KIND["Node"], "", "cpu-1", MERGE, {"metadata": {"labels": {"n": str(i)}}}
            )
        informer.watch_once()
        assert informer.relists == relists + 1
        assert ("gpu-a1", "5") in changes
    finally:
        cluster.close()
        server.stop()


def test_the_informer_survives_the_api_server_going_away() -> None:
    store = ClusterState()
    store.load(healthy_cluster(2, datetime.now(UTC))["items"])
    server = SimulatedApiServer(store).start()
    port = server.port
    seen: list[Signal] = []
    cluster = KubeCluster.for_url(server.url)
    informer = Informer(
        cluster,
        "Node",
        lambda old, new: seen.extend(node_signals(old, new, datetime.now(UTC))),
        project=node_state,
        watch_timeout_s=1,
        retry_delay_s=0.2,
    ).start()
    try:
        deadline = time.monotonic() + 10
        while not informer.relists and time.monotonic() < deadline:
            time.sleep(0.05)
        assert informer.relists == 1
        server.stop()
        time.sleep(1.0)
        _ready(store, "gpu-a2", "False")  # happens while the API is unreachable
        server = SimulatedApiServer(store, port).start()
        [signal] = _wait_for(seen, lambda s: s.name == "NodeNotReady")
        assert signal.node == "gpu-a2"
        assert informer.relists == 1  # resumed from its version: no relist was needed
    finally:
        informer.stop()
        cluster.close()
        server.stop()


def test_caches_hold_only_pods_that_matter_and_no_events(sim_cluster: Sim) -> None:
    _, cluster = sim_cluster
    watcher, _ = _collect(cluster)
    try:
        nodes, pods, events = watcher.informers
        namespaces = {ns for ns, _ in pods.cache}
        assert namespaces == {"gpu-operator", "ml"}  # no metrics agents: they ask for no GPU
        assert pods.cache[("ml", "train-llm-0-worker-0")].requests_gpu
        assert not pods.cache[("gpu-operator", next(iter(pods.cache))[1])].requests_gpu
        assert dict(nodes.cache[("", "gpu-a1")].gpus) == {"nvidia.com/gpu": "8"}
        assert events.cache == {}
    finally:
        watcher.stop()


def test_a_handler_that_fails_once_does_not_end_the_watch(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    seen: list[str] = []
    failures = [1]

    def handler(old: NodeState | None, new: NodeState | None) -> None:
        if old is not None and failures:
            failures.pop()
            raise RuntimeError("a bug in a handler")
        if old is not None and new is not None:
            seen.append(new.name)

    informer = Informer(
        cluster, "Node", handler, project=node_state, watch_timeout_s=1, retry_delay_s=0.1
    ).start()
    try:
        deadline = time.monotonic() + 10
        while not informer.relists and time.monotonic() < deadline:
            time.sleep(0.05)
        _ready(server.store, "gpu-a1", "False")  # the handler fails on this one
        time.sleep(0.5)
        _ready(server.store, "gpu-a2", "False")
        deadline = time.monotonic() + 10
        while "gpu-a2" not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "gpu-a2" in seen
    finally:
        informer.stop()


def test_mig_resources_lost_and_restored_become_signals(sim_cluster: Sim) -> None:
    """A MIG node's GPUs are nvidia.com/mig-* resources: a reboot that loses the layout and
    mig-manager re-applying it change only those, and both must reach the pass (or the
    incident the reboot opened never sees its node healthy again)."""
    server, cluster = sim_cluster
    faults.enable_mig(server.store, "gpu-a4")
    watcher, seen = _collect(cluster)
    try:
        faults.inject(server.store, "reboot", "gpu-a4", datetime.now(UTC))
        [lost] = _wait_for(seen, lambda s: s.name == "GPUAllocatableChanged" and s.node == "gpu-a4")
        assert lost.status == "firing"
        assert lost.labels["resource"] == "nvidia.com/mig-1g.10gb"
        assert (lost.labels["from"], lost.labels["to"]) == ("56", "0")
        seen.clear()
        faults.repair(server.store, "reboot", "gpu-a4", datetime.now(UTC))
        [back] = _wait_for(seen, lambda s: s.name == "GPUAllocatableChanged" and s.node == "gpu-a4")
        assert back.status == "resolved"
        assert (back.labels["from"], back.labels["to"]) == ("0", "56")
    finally:
        watcher.stop()
