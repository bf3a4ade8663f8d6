"""The health gate's GPU smoke test (bot/gate/smoke_test.py) through the real kubernetes
client against the simulator, whose kubelet runs `nvidia-smi -L` over its fault state.

Most tests drive the simulated controllers deterministically: the smoke test's injected
`sleep` runs one `Controllers.reconcile()` and moves a fake clock. One test runs the
controllers' background threads in real time, as `gpubot demo` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.acting.cordoning import add_taint, cordon
from bot.config import Settings, SmokeTestSettings
from bot.errors import PermanentError
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot
from bot.facts.snapshots import Snapshot
from bot.gate.items import ExternalEvidence, failing_text, health_gate
from bot.gate.smoke_test import (
    SmokeTest,
    SmokeTests,
    parse_gpu_list,
    run_smoke_test,
    smoke_test_pod,
)
from bot.kube.cluster import KubeCluster
from bot.model import ClusterFacts, Lang
from bot.names import MAINTENANCE_TAINT, SMOKE_TEST_LABEL
from gpusim.apiserver import SimulatedApiServer
from gpusim.controllers import Controllers
from gpusim.faults import inject
from gpusim.metrics import gpu_uuid
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.clocks import FakeClock

NODE = "gpu-a1"
NS = "gpubot"
POD, NODE_KIND = BY_KIND["Pod"], BY_KIND["Node"]
SMP = "application/strategic-merge-patch+json"
CLEAN = ExternalEvidence(new_gpu_errors=[])


class Sim:
    """A 4-node simulated cluster, the real client on it, and controllers not yet running."""

    def __init__(self) -> None:
        self.store = ClusterState()
        self.store.load(healthy_cluster(4, datetime.now(UTC))["items"])
        self.server = SimulatedApiServer(self.store).start()
        self.cluster = KubeCluster.for_url(self.server.url)
        self.controllers = Controllers(self.store)
        self.created: list[dict[str, Any]] = []

    def create(self, kind: Any, namespace: str, body: Any) -> dict[str, Any]:
        """The real adapter's create, keeping what the server stored (the pod is gone later)."""
        created = self.cluster.create(kind, namespace, body)
        self.created.append(created)
        return created

    def __getattr__(self, name: str) -> Any:  # the rest of the Cluster port, as is
        return getattr(self.cluster, name)

    def take_out_of_service(self, node: str = NODE) -> None:
        """What the executor leaves before the gate: cordoned, maintenance taint, GPU pods gone."""
        cordon(self.cluster, node)
        add_taint(self.cluster, node, MAINTENANCE_TAINT, "inc-7", "NoSchedule")
        pods, _ = self.store.list(POD, "", field_selector=f"spec.nodeName={node}")
        for pod in pods:
            limits = [
                (c.get("resources") or {}).get("limits") or {} for c in pod["spec"]["containers"]
            ]
            if any("nvidia.com/gpu" in lim for lim in limits):
                self.store.delete(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.controllers.reconcile()

    def smoke_pods(self) -> list[dict[str, Any]]:
        return self.cluster.list("Pod", NS, label_selector=f"{SMOKE_TEST_LABEL}=true")

    def facts(self) -> ClusterFacts:
        snapshot: Snapshot = read_snapshot(self.cluster)
        return collect_facts(snapshot, [], Settings(), datetime.now(UTC))

    def close(self) -> None:
        self.controllers.stop()
        self.cluster.close()
        self.server.stop()


class Ticks:
    """The smoke test's sleep: each moves `clock` and is one round of the simulated
    controllers (or none)."""

    def __init__(self, controllers: Controllers | None) -> None:
        # Seconds from 0, as the monotonic clock the smoke test counts its deadline on.
        self.clock = FakeClock(datetime.fromtimestamp(0, UTC))
        self.controllers = controllers
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(seconds)
        if self.controllers is not None:
            self.controllers.reconcile()


@pytest.fixture
def sim() -> Iterator[Sim]:
    fresh = Sim()
    try:
        yield fresh
    finally:
        fresh.close()


Run = Callable[..., SmokeTest]


@pytest.fixture
def run(sim: Sim) -> Run:
    """run_smoke_test on NODE with the controllers driven by the fake clock."""

    def go(**options: Any) -> SmokeTest:
        ticks = Ticks(sim.controllers)
        options.setdefault("timeout_s", 30.0)
        options.setdefault("poll_s", 1.0)
        return run_smoke_test(sim, NODE, 8, clock=ticks.clock.time, sleep=ticks.sleep, **options)

    return go


def test_the_pod_is_bound_by_name_tolerates_maintenance_and_asks_for_a_gpu() -> None:
    body = smoke_test_pod(NODE, "inc-7", "cuda:base", NS, deadline_s=120)
    spec = body["spec"]
    container = spec["containers"][0]
    assert spec["nodeName"] == NODE and "nodeSelector" not in spec and "affinity" not in spec
    assert {"key": MAINTENANCE_TAINT, "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert container["command"] == ["nvidia-smi"] and container["args"] == ["-L"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 120
    assert body["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpubot",
        SMOKE_TEST_LABEL: "true",
    }
    assert body["metadata"]["annotations"] == {"gpubot.io/incident": "inc-7"}
    assert body["metadata"]["namespace"] == NS

    every = smoke_test_pod(NODE, None, "cuda:base", NS, gpus=8)["spec"]["containers"][0]
    assert every["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert all(e["name"] != "NVIDIA_VISIBLE_DEVICES" for e in every["env"])

    long_node = "ip-10-0-0-1." + "x" * 80 + ".compute.internal"
    names = {smoke_test_pod(long_node, None)["metadata"]["name"] for _ in range(20)}
    assert len(names) == 20  # unique per run
    assert all(len(n) <= 63 and n.startswith("gpubot-smoke-ip-10-0-0-1.") for n in names)


def test_nvidia_smi_output_is_parsed_line_by_line() -> None:
    output = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
        "  MIG 1g.10gb     Device  0: (UUID: MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)\n"
        "Unable to determine the device handle for GPU 0000:0F:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU\n"
        "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-66666666-2222-3333-4444-555555555555)\n"
    )
    gpus, other = parse_gpu_list(output)
    assert [(g.index, g.name) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-80GB"),
        (2, "NVIDIA A100-SXM4-80GB"),
    ]
    assert gpus[0].uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert other == [
        "Unable to determine the device handle for GPU 0000:0F:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU"
    ]


def test_a_healthy_cordoned_node_passes_with_every_gpu_listed(sim: Sim) -> None:
    sim.take_out_of_service()
    sim.controllers.start()  # the background threads, in real time
    result = run_smoke_test(sim, NODE, 8, incident="inc-7", timeout_s=20, poll_s=0.05)

    assert result.outcome == "pass", result.reason
    assert result.listed == tuple(range(8)) and result.missing == ()
    assert result.reason == "nvidia-smi -L listed all 8 GPUs (NVIDIA A100-SXM4-80GB)"
    assert gpu_uuid(NODE, 3) in result.output
    assert result.phase == "Succeeded" and result.exit_code == 0

    # What the API server stored: bound past the scheduler, tolerating the taint, one GPU.
    [created] = sim.created
    assert created["spec"]["nodeName"] == NODE
    assert {"key": MAINTENANCE_TAINT, "operator": "Exists", "effect": "NoSchedule"} in created[
        "spec"
    ]["tolerations"]
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    node = sim.cluster.get("Node", "", NODE)
    assert node["spec"]["unschedulable"] is True
    assert any(t["key"] == MAINTENANCE_TAINT for t in node["spec"]["taints"])

    # Gone afterwards, deleted by gpubot itself.
    assert sim.smoke_pods() == [] and result.left_behind is None
    assert (NS, result.pod) in sim.store.direct_deletes

    # And the gate reads it as its smoke-test item.
    facts = sim.facts()
    gate = health_gate(
        facts.nodes[NODE], facts.pools, ExternalEvidence(new_gpu_errors=[], smoke_test=result)
    )
    assert gate.passed, gate.failing
    smoke = next(i for i in gate.items if i.name == "gpu-smoke-test")
    assert (smoke.outcome, smoke.required) == ("pass", True)


def test_a_gpu_fallen_off_the_bus_fails_naming_it(sim: Sim, run: Run) -> None:
    inject(sim.store, "xid", NODE, datetime.now(UTC), code=79, gpu=3)
    sim.take_out_of_service()
    result = run()

    assert result.outcome == "fail"
    assert result.listed == (0, 1, 2, 4, 5, 6, 7) and result.missing == (3,)
    assert result.reason.startswith("nvidia-smi -L listed 7 of 8 GPUs, missing GPU 3; ")
    assert "exit code 15" in result.reason
    assert (
        "Unable to determine the device handle for GPU 0000:4E:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU" in result.reason
    )
    assert sim.smoke_pods() == []

    facts = sim.facts()
    gate = health_gate(
        facts.nodes[NODE], facts.pools, ExternalEvidence(new_gpu_errors=[], smoke_test=result)
    )
    failing = {i.name: i.reason for i in gate.failing}
    assert failing["gpu-smoke-test"] == result.reason
    assert failing["gpus-allocatable"] == "7 of 8 GPUs allocatable"


def test_a_driver_that_is_not_loaded_fails_with_nvidia_smis_message(sim: Sim, run: Run) -> None:
    inject(sim.store, "driver-upgrade-failed", NODE, datetime.now(UTC))
    sim.take_out_of_service()
    # The device plugin has not noticed yet: it still offers all eight GPUs.
    sim.store.patch(NODE_KIND, "", NODE, SMP, {"status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    result = run()

    assert result.outcome == "fail" and result.listed == ()
    assert result.phase == "Failed" and result.exit_code == 9
    assert result.reason == (
        "exit code 9; NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
        "driver. Make sure that the latest NVIDIA driver is installed and running."
    )
    assert sim.smoke_pods() == []


def test_no_healthy_gpu_to_allocate_is_the_kubelets_rejection(sim: Sim, run: Run) -> None:
    inject(sim.store, "driver-upgrade-failed", NODE, datetime.now(UTC))  # allocatable 0
    sim.take_out_of_service()
    result = run()

    assert result.outcome == "fail" and result.exit_code is None and result.output == ""
    assert result.reason == (
        "UnexpectedAdmissionError: Pod was rejected: Allocate failed due to no healthy devices "
        "present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"
    )
    assert sim.smoke_pods() == []


def test_a_plugin_gone_for_good_leaves_nothing_to_request(sim: Sim, run: Run) -> None:
    # Crash-looping for longer than the kubelet's 5-minute grace: the resource is unregistered.
    inject(sim.store, "plugin-crashloop", NODE, datetime.now(UTC), restarts=10)
    sim.take_out_of_service()
    result = run()

    assert result.reason == (
        "OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough resource: "
        "nvidia.com/gpu, requested: 1, used: 0, capacity: 0"
    )
    events = sim.cluster.list("Event", NS, field_selector=f"involvedObject.name={result.pod}")
    assert [(e["type"], e["reason"], e["source"]) for e in events] == [
        ("Warning", "OutOfnvidia.com/gpu", {"component": "kubelet", "host": NODE})
    ]


def test_an_api_that_is_away_makes_the_test_unknown_not_failed(sim: Sim, run: Run) -> None:
    sim.server.stop()
    result = run()
    assert result.outcome == "unknown"
    assert result.reason.startswith("smoke-test pod not created: create Pod gpubot/gpubot-smoke-")
    assert result.left_behind is not None  # the delete could not be sent either: said so


def test_asking_for_every_gpu_is_refused_once_the_plugin_took_one_out(sim: Sim, run: Run) -> None:
    inject(sim.store, "xid", NODE, datetime.now(UTC), code=79, gpu=3)
    sim.take_out_of_service()
    result = run(request_all=True)

    assert result.outcome == "fail"
    assert "requested number of devices unavailable for nvidia.com/gpu. Requested: 8, " in (
        result.reason
    )
    assert "Available: 7" in result.reason
    assert sim.created[0]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_gpus_still_held_by_a_workload_are_not_available(sim: Sim, run: Run) -> None:
    cordon(sim.cluster, NODE)  # cordoned, but the 8-GPU training worker still runs
    result = run()
    assert result.outcome == "fail"
    assert "Requested: 1, Available: 0" in result.reason


def test_a_pod_nobody_runs_times_out_quickly_and_is_deleted(sim: Sim) -> None:
    sim.take_out_of_service()
    ticks = Ticks(None)  # no kubelet: the pod stays Pending
    result = run_smoke_test(
        sim, NODE, 8, timeout_s=5, poll_s=1, clock=ticks.clock.time, sleep=ticks.sleep
    )

    assert result.outcome == "fail" and result.phase == "Pending"
    assert result.reason == (
        "the smoke-test pod did not finish within 5s: phase Pending, "
        f"not started by the kubelet on {NODE}"
    )
    assert ticks.sleeps == [1, 1, 1, 1, 1]
    assert sim.smoke_pods() == [] and (NS, result.pod) in sim.store.direct_deletes


def test_the_log_route_serves_what_the_kubelet_kept(sim: Sim) -> None:
    sim.take_out_of_service()
    body = smoke_test_pod(NODE, None, "cuda:base", NS)
    name = body["metadata"]["name"]
    sim.cluster.create("Pod", NS, body)
    with pytest.raises(PermanentError, match=f'container "nvidia-smi" in pod "{name}" is waiting'):
        sim.cluster.pod_log(NS, name)  # bound, not started: the kubelet's 400
    sim.controllers.reconcile()
    lines = sim.cluster.pod_log(NS, name, "nvidia-smi").splitlines()
    assert lines == [
        f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: {gpu_uuid(NODE, i)})" for i in range(8)
    ]
    status = sim.cluster.get("Pod", NS, name)["status"]
    assert status["phase"] == "Succeeded"
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    with pytest.raises(PermanentError, match="not valid"):
        sim.cluster.pod_log(NS, name, "other")
    # Other pods keep the generic line.
    worker = sim.cluster.list("Pod", "", field_selector="spec.nodeName=gpu-a2")[0]
    assert "simulated log of" in sim.cluster.pod_log(
        worker["metadata"]["namespace"], worker["metadata"]["name"]
    )


def test_the_gate_compares_the_listing_with_the_nodes_own_gpu_count(
    edited: Callable[..., Snapshot], facts_of: Callable[..., ClusterFacts]
) -> None:
    facts = facts_of(edited())
    node = facts.nodes["gpu-a1"]
    required = health_gate(
        node, facts.pools, ExternalEvidence(new_gpu_errors=[], require_smoke_test=True)
    )
    assert {i.name: (i.outcome, i.reason) for i in required.failing} == {
        "gpu-smoke-test": ("unknown", "not run")
    }
    assert health_gate(node, facts.pools, CLEAN).passed  # optional and not run: not in the way

    # Told to look for 4 GPUs, it passed; the node should have 8.
    short = SmokeTest("gpu-a1", "p", 4, "pass", "nvidia-smi -L listed all 4 GPUs", (0, 1, 2, 3))
    gate = health_gate(node, facts.pools, ExternalEvidence(new_gpu_errors=[], smoke_test=short))
    assert {i.name: i.reason for i in gate.failing} == {
        "gpu-smoke-test": "nvidia-smi -L listed 4 of the node's 8 GPUs, missing GPU 4, 5, 6, 7"
    }

    # A test that ran and could not decide keeps the gate shut, required or not.
    unknown = SmokeTest("gpu-a1", "p", 8, "unknown", "smoke-test pod not created: forbidden")
    gate = health_gate(node, facts.pools, ExternalEvidence(new_gpu_errors=[], smoke_test=unknown))
    assert [i.name for i in gate.failing] == ["gpu-smoke-test"]


def test_the_executors_gate_runs_the_pod_once_the_rest_passes_and_reuses_a_recent_result(
    sim: Sim,
) -> None:
    """`SmokeTests.gate` (what the executor's health gate calls with remediation.smoke_test
    on): the pod runs when it is the only thing the gate lacks, its result stands for
    max_age_s, and a node the gate refuses anyway gets no pod."""
    sim.take_out_of_service()
    clock = FakeClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    settings = SmokeTestSettings(enabled=True, timeout_s=30, max_age_s=600)
    tests = SmokeTests(sim, settings, clock, sleep=Ticks(sim.controllers).sleep)

    facts = sim.facts()
    first = tests.gate(facts.nodes[NODE], facts, CLEAN, "nvidia.com/gpu")
    assert first.passed, first.failing
    smoke = next(i for i in first.items if i.name == "gpu-smoke-test")
    assert smoke.reason == "nvidia-smi -L listed all 8 GPUs (NVIDIA A100-SXM4-80GB)"
    assert [p["spec"]["nodeName"] for p in sim.created] == [NODE]

    clock.now += timedelta(seconds=599)
    assert tests.gate(facts.nodes[NODE], facts, CLEAN, "nvidia.com/gpu").passed
    assert len(sim.created) == 1  # the recent pass stands
    clock.now += timedelta(seconds=2)
    assert tests.gate(facts.nodes[NODE], facts, CLEAN, "nvidia.com/gpu").passed
    assert len(sim.created) == 2  # too old: run again

    # Prometheus still sees Xid errors: the gate fails on them, and no pod is started.
    other = "gpu-a2"
    sim.take_out_of_service(other)
    facts = sim.facts()
    errors = ExternalEvidence(new_gpu_errors=["Xid 79 on GPU 3"])
    refused = tests.gate(facts.nodes[other], facts, errors, "nvidia.com/gpu")
    assert {i.name: i.outcome for i in refused.failing} == {
        "no-new-gpu-errors": "fail",
        "gpu-smoke-test": "unknown",
    }
    assert len(sim.created) == 2 and sim.smoke_pods() == []


def test_under_zh_the_gates_smoke_test_item_says_what_it_found_in_chinese(sim: Sim) -> None:
    """The smoke test's own words ("nvidia-smi -L listed 7 of 8 GPUs, missing GPU 3; exit code
    …") were English in the gate's failing items under zh; nvidia-smi's own line stays as it
    printed it."""
    inject(sim.store, "xid", NODE, datetime.now(UTC), code=79, gpu=3)
    sim.take_out_of_service()
    settings = SmokeTestSettings(enabled=True, timeout_s=30, max_age_s=600)
    now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    tests = SmokeTests(sim, settings, lambda: now, sleep=Ticks(sim.controllers).sleep)
    ran = tests.run(NODE, 8)

    facts = sim.facts()
    gate = tests.gate(facts.nodes[NODE], facts, CLEAN, "nvidia.com/gpu")

    [smoke] = [i for i in gate.failing if i.name == "gpu-smoke-test"]
    zh = smoke.line(Lang.ZH)
    assert zh.startswith(
        "GPU 冒烟测试：nvidia-smi -L 只列出 8 块 GPU 中的 7 块，缺少 GPU 3；退出码 15；"
    ), zh
    assert "Unable to determine the device handle for GPU 0000:4E:00.0" in zh
    assert smoke.line(Lang.EN) == f"gpu-smoke-test: {ran.reason}"
    # What the thread and the leader's follow-up say of a gate that does not pass.
    assert "GPU 冒烟测试：nvidia-smi -L 只列出 8 块 GPU 中的 7 块" in (
        failing_text(gate.failing, Lang.ZH)
    )


def test_under_zh_a_passing_smoke_test_says_so_in_chinese(sim: Sim) -> None:
    sim.take_out_of_service()
    settings = SmokeTestSettings(enabled=True, timeout_s=30, max_age_s=600)
    now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    tests = SmokeTests(sim, settings, lambda: now, sleep=Ticks(sim.controllers).sleep)

    facts = sim.facts()
    gate = tests.gate(facts.nodes[NODE], facts, CLEAN, "nvidia.com/gpu")

    [smoke] = [i for i in gate.items if i.name == "gpu-smoke-test"]
    assert smoke.text(Lang.ZH) == "nvidia-smi -L 列出了全部 8 块 GPU（NVIDIA A100-SXM4-80GB）"
    assert smoke.text(Lang.EN) == "nvidia-smi -L listed all 8 GPUs (NVIDIA A100-SXM4-80GB)"


def test_under_zh_a_smoke_test_that_could_not_start_says_so_in_chinese(sim: Sim) -> None:
    sim.take_out_of_service()
    facts = sim.facts()
    sim.server.stop()
    settings = SmokeTestSettings(enabled=True, timeout_s=30, max_age_s=600)
    now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    tests = SmokeTests(sim, settings, lambda: now, sleep=Ticks(None).sleep)

    gate = tests.gate(facts.nodes[NODE], facts, CLEAN, "nvidia.com/gpu")

    [smoke] = [i for i in gate.failing if i.name == "gpu-smoke-test"]
    assert smoke.text(Lang.ZH).startswith("未能创建冒烟测试 Pod：create Pod gpubot/"), smoke
