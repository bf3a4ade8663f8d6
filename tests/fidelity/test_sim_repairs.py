"""Every fault can be taken away again: inject it, repair it, and the node is what it was.

A fresh simulated cluster behind the real kubectl, with its dcgm-exporter endpoint; faults
and repairs go through the control endpoints `gpubot sim inject` and `sim repair` use. The
node, its pods, the budgets over them and its series are read before the fault and after the
repair, and compared modulo what only records time, identity or restart history
(`tests.helpers.healthy`). Each case runs twice: on a schedulable node, and on a node a person
cordoned first, whose cordon the repair must leave alone.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpusim.apiserver import SimulatedApiServer
from gpusim.exporter import DcgmExporterServer
from gpusim.faults import FAULTS
from gpusim.launching import SimulatorError, inject_remote, repair_remote
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.healthy import Series, node_view, series_changes, series_of
from tests.helpers.kubectl import Kubectl, kubectl_for, needs_kubectl

pytestmark = needs_kubectl

NODE = "gpu-a2"
CASES: list[tuple[str, dict[str, Any]]] = [
    ("zero-capacity", {}),
    ("plugin-crashloop", {}),
    ("xid", {"code": 74, "gpu": 3}),
    ("xid", {"code": 79, "gpu": 3}),  # the GPU fell off the bus: only a reboot brings it back
    ("ecc-dbe", {"gpu": 1}),
    ("nvlink", {"gpu": 2}),
    ("fabric-manager-down", {}),
    ("reboot", {}),
    ("mig-failed", {"config": "all-1g.10gb"}),
    ("driver-upgrade", {"version": "570.86.15"}),
    ("driver-upgrade-failed", {}),
    ("pdb-block", {}),
    ("finalizer-stuck", {}),
    ("not-ready", {}),
]
LIFETIME_AFTER = {
    # A double-bit error is counted for the GPU's life and its row stays remapped.
    "ecc-dbe": {
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 1.0,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 1.0,
    }
}


@dataclass
class Sim:
    api: SimulatedApiServer
    metrics: DcgmExporterServer

    @property
    def store(self) -> ClusterState:
        return self.api.store


@pytest.fixture
def sim() -> Iterator[Sim]:
    store = ClusterState()
    store.load(healthy_cluster(4, datetime.now(UTC))["items"])
    api = SimulatedApiServer(store).start()
    metrics = DcgmExporterServer(store).start()
    try:
        yield Sim(api, metrics)
    finally:
        metrics.stop()
        api.stop()


@pytest.fixture
def kubectl(sim: Sim, tmp_path: Path) -> Kubectl:
    return kubectl_for(sim.api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


def scrape(sim: Sim) -> Series | None:
    """The node's series, or None while its exporter is down (503)."""
    try:
        return series_of(sim.metrics.url, NODE)
    except urllib.error.HTTPError as exc:
        assert exc.code == 503
        return None


def test_every_fault_has_a_case_here() -> None:
    assert sorted({fault for fault, _ in CASES}) == sorted(FAULTS)


@pytest.mark.parametrize("cordoned", [False, True], ids=["schedulable", "cordoned-by-a-person"])
@pytest.mark.parametrize(
    ("fault", "params"), CASES, ids=[f"{f}{p.get('code', '')}" for f, p in CASES]
)
def test_a_repaired_node_is_the_healthy_node_it_was(
    sim: Sim, kubectl: Kubectl, fault: str, params: dict[str, Any], cordoned: bool
) -> None:
    if cordoned:
        assert kubectl("cordon", NODE).returncode == 0
    before = node_view(kubectl, NODE)
    series_before = scrape(sim)
    assert series_before is not None

    version = sim.store.resource_version
    inject_remote(sim.api.url, fault, NODE, params)
    during = scrape(sim)  # the exporter sees the Xids while they are there
    assert sim.store.resource_version > version or during != series_before, fault

    repaired = repair_remote(sim.api.url, fault, NODE, {})
    assert repaired["fault"] == fault and repaired["description"]
    after = node_view(kubectl, NODE)

    # What a repair cannot bring back: pods the fault evicted (their owners make new ones).
    names = before.pop("names")
    after.pop("names")
    for namespace, name in sim.store.evictions:
        del before["pods"][names[f"{namespace}/{name}"]]
    assert after["node"] == before["node"]
    assert sorted(after["pods"]) == sorted(before["pods"])
    for key, pod in before["pods"].items():
        assert after["pods"][key] == pod, key
    assert after["budgets"] == before["budgets"]
    assert bool(after["node"]["spec"].get("unschedulable")) is cordoned

    series_after = scrape(sim)
    assert series_after is not None
    changes = series_changes(series_before, series_after)
    grown = {name: value for (name, _), value in changes.pop("lifetime").items()}
    assert changes == {"missing": [], "new": [], "changed": {}}
    assert grown == LIFETIME_AFTER.get(fault, {})


def test_a_repair_of_a_healthy_node_changes_nothing_and_says_so(sim: Sim) -> None:
    version = sim.store.resource_version
    for fault in FAULTS:
        done = repair_remote(sim.api.url, fault, NODE, {})
        assert done["description"][0].startswith(f"{NODE}: nothing to repair"), done
    assert sim.store.resource_version == version


def test_a_repair_is_refused_for_an_unknown_fault_or_node(sim: Sim) -> None:
    with pytest.raises(SimulatorError, match="unknown fault 'meltdown'"):
        repair_remote(sim.api.url, "meltdown", NODE, {})
    with pytest.raises(SimulatorError, match='node "gpu-z9" not found'):
        repair_remote(sim.api.url, "xid", "gpu-z9", {})
    with pytest.raises(SimulatorError, match="unexpected keyword argument 'code'"):
        repair_remote(sim.api.url, "xid", NODE, {"code": 79})


def test_the_xid_gauge_only_clears_with_a_new_dcgm(sim: Sim) -> None:
    """dcgm-exporter#500: DCGM_FI_DEV_XID_ERRORS keeps the last Xid after the GPU recovered;
    the repair clears it by restarting the exporter, whose pod is then a new one."""

    def reading() -> float:
        series = scrape(sim)
        assert series is not None
        return next(
            value
            for (name, labels), value in series.items()
            if name == "DCGM_FI_DEV_XID_ERRORS" and dict(labels)["gpu"] == "3"
        )

    def exporter_pods() -> list[str]:
        pods, _ = sim.store.list(
            BY_KIND["Pod"], "gpu-operator", "app=nvidia-dcgm-exporter", f"spec.nodeName={NODE}"
        )
        return [p["metadata"]["name"] for p in pods]

    first = exporter_pods()
    inject_remote(sim.api.url, "xid", NODE, {"code": 74, "gpu": 3})
    assert reading() == 74
    done = repair_remote(sim.api.url, "xid", NODE, {})
    assert any("DCGM_FI_DEV_XID_ERRORS back to 0" in line for line in done["description"])
    assert reading() == 0
    assert len(exporter_pods()) == 1 and exporter_pods() != first
