"""The simulator's dcgm-exporter endpoint, scraped over HTTP and parsed as Prometheus text.

Note: prometheus_client's parser names the samples of a `counter` family `<name>_total`,
although the text (like dcgm-exporter's) has the bare name; `values()` undoes that.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from gpusim.exporter import CONTENT_TYPE, DcgmCollector, DcgmExporterServer, running
from gpusim.faults import FaultError, inject
from gpusim.metrics import (
    ALL_FIELDS,
    FIELD_NAMES,
    XID_COUNT,
    XID_WINDOW_MS,
    gpu_uuid,
    model_name,
    set_temperature,
)
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.clocks import FakeClock

NOW = FIXTURE_NOW
NODE = "gpu-a1"
OTHER = "gpu-a2"
LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}
FLIT = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
REPLAY = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"
READINGS = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_POWER_USAGE")
FM_STATUS = "DCGM_FI_DEV_FABRIC_MANAGER_STATUS"
XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
COUNT = XID_COUNT.name
WINDOW = {"window_size_in_ms": str(XID_WINDOW_MS)}
EXPORTER_START = datetime.fromtimestamp(1_800_000_000, UTC)
"""Where the exporter's wall clock starts, in tests that move it by hand."""


@pytest.fixture
def store() -> ClusterState:
    fresh = ClusterState()
    fresh.load(healthy_cluster(2, NOW)["items"])
    return fresh


@pytest.fixture
def server(store: ClusterState) -> Iterator[DcgmExporterServer]:
    with running(store) as started:
        yield started


def fetch(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def scrape(server: DcgmExporterServer, node: str | None = None) -> dict[str, Metric]:
    status, content_type, text = fetch(server.node_url(node) if node else server.url + "/metrics")
    assert status == 200, text
    assert content_type == CONTENT_TYPE
    return {family.name: family for family in text_string_to_metric_families(text)}


def values(family: Metric, **match: str) -> dict[tuple[str, int], float]:
    """(Hostname, gpu) -> value of the samples whose labels include `match`."""
    found = {}
    for sample in family.samples:
        assert sample.name in (family.name, family.name + "_total")
        if all(sample.labels.get(k) == v for k, v in match.items()):
            key = (sample.labels["Hostname"], int(sample.labels["gpu"]))
            assert key not in found
            found[key] = float(sample.value)
    return found


def xid_counts(families: dict[str, Metric], node: str = NODE) -> dict[int, dict[str, float]]:
    """GPU -> `xid` label ("" for the series without one) -> DCGM_EXP_XID_ERRORS_COUNT."""
    found: dict[int, dict[str, float]] = {}
    for sample in families[COUNT].samples:
        assert sample.name == COUNT
        assert sample.labels["window_size_in_ms"].isdigit()
        if sample.labels["Hostname"] == node:
            by_code = found.setdefault(int(sample.labels["gpu"]), {})
            code = sample.labels.get("xid", "")
            assert code not in by_code
            by_code[code] = float(sample.value)
    return found


def gpu_values(server: DcgmExporterServer, field: str, node: str = NODE) -> dict[int, float]:
    return {gpu: v for (_, gpu), v in values(scrape(server, node)[field]).items()}


# ---- names, types, labels ------------------------------------------------------------------


def test_every_field_with_dcgm_exporter_type_and_bare_name(server: DcgmExporterServer) -> None:
    _, _, text = fetch(server.node_url(NODE))
    for field in ALL_FIELDS:
        assert f"# TYPE {field.name} {field.type}\n" in text
        assert f"# HELP {field.name} {field.help}\n" in text
    assert "_total " not in text and "_total{" not in text
    families = scrape(server, NODE)
    assert set(families) == {*FIELD_NAMES, COUNT}
    assert families["DCGM_FI_DEV_XID_ERRORS"].type == "gauge"
    assert families[COUNT].type == "gauge"
    assert families["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].type == "counter"
    assert families["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"].type == "counter"
    assert families["DCGM_FI_DEV_ROW_REMAP_FAILURE"].type == "gauge"


def test_labels_per_gpu_from_node_labels(server: DcgmExporterServer) -> None:
    families = scrape(server, NODE)
    for family in families.values():
        samples = family.samples
        assert len(samples) == 8
        for sample in samples:
            # The exporter's Xid count adds its window; an empty window has no `xid`.
            extra = {"window_size_in_ms"} if family.name == COUNT else set()
            assert set(sample.labels) == LABELS | extra
            index = int(sample.labels["gpu"])
            assert sample.labels["device"] == f"nvidia{index}"
            assert sample.labels["Hostname"] == NODE
            assert sample.labels["modelName"] == "NVIDIA A100-SXM4-80GB"
            assert sample.labels["DCGM_FI_DRIVER_VERSION"] == "550.54.15"
            assert sample.labels["UUID"] == gpu_uuid(NODE, index)
            assert re.fullmatch(
                r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", sample.labels["UUID"]
            )
            assert re.fullmatch(r"00000000:[0-9A-F]{2}:00\.0", sample.labels["pci_bus_id"])
        assert sorted(int(s.labels["gpu"]) for s in samples) == list(range(8))
    temps = families["DCGM_FI_DEV_GPU_TEMP"].samples
    assert len({s.labels["UUID"] for s in temps}) == 8
    assert len({s.labels["pci_bus_id"] for s in temps}) == 8


def test_healthy_values_are_plausible_and_deterministic(store: ClusterState) -> None:
    with running(store) as first:
        once = scrape(first)
        twice = scrape(first)
    fresh = ClusterState()
    fresh.load(healthy_cluster(2, NOW)["items"])
    with running(fresh) as second:
        again = scrape(second)
    for name in FIELD_NAMES:
        assert values(once[name]) == values(twice[name]) == values(again[name])
    temps = values(once["DCGM_FI_DEV_GPU_TEMP"])
    memory = values(once["DCGM_FI_DEV_MEMORY_TEMP"])
    power = values(once["DCGM_FI_DEV_POWER_USAGE"])
    assert len(temps) == 16
    assert all(40 <= t <= 75 for t in temps.values())
    assert all(memory[k] > temps[k] for k in temps)
    assert all(250 <= p <= 400 for p in power.values())
    assert len(set(temps.values())) > 1
    for name in FIELD_NAMES:
        if name not in (*READINGS, FM_STATUS):
            assert set(values(once[name]).values()) == {0.0}, name
    assert set(values(once[FM_STATUS]).values()) == {3.0}  # Success


def test_all_nodes_at_once_leaves_out_cpu_nodes(server: DcgmExporterServer) -> None:
    families = scrape(server)
    hosts = {s.labels["Hostname"] for s in families["DCGM_FI_DEV_XID_ERRORS"].samples}
    assert hosts == {NODE, OTHER}
    assert len(families["DCGM_FI_DEV_GPU_TEMP"].samples) == 16


def test_unknown_node_cpu_node_and_other_paths_are_404(server: DcgmExporterServer) -> None:
    for url in (
        server.node_url("nope"),
        server.node_url("cpu-1"),
        server.url + "/",
        server.url + "/metrics/",
        server.url + "/metrics/gpu-a1/extra",
    ):
        assert fetch(url)[0] == 404, url
    assert "no NVIDIA GPUs" in fetch(server.node_url("cpu-1"))[2]


def test_extra_node_label(store: ClusterState) -> None:
    with running(store, node_label="kubernetes_node") as server:
        for family in scrape(server).values():
            for sample in family.samples:
                extra = {"window_size_in_ms"} if family.name == COUNT else set()
                assert set(sample.labels) == LABELS | {"kubernetes_node"} | extra
                assert sample.labels["kubernetes_node"] == sample.labels["Hostname"]
    with running(store, node_label="Hostname") as server:
        sample = scrape(server, NODE)["DCGM_FI_DEV_GPU_TEMP"].samples[0]
        assert set(sample.labels) == LABELS
    for bad in (
        "",
        "kubernetes-node",
        "0node",
        "DCGM_FI_DRIVER_VERSION",
        "xid",
        "window_size_in_ms",
    ):
        with pytest.raises(ValueError):
            DcgmCollector(store, node_label=bad)
    for window in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="xid_window_ms"):
            DcgmCollector(store, xid_window_ms=window)  # type: ignore[arg-type]


def test_each_server_has_its_own_registry(store: ClusterState) -> None:
    other = ClusterState()
    other.load(healthy_cluster(1, NOW, prefix="gpu-b")["items"])
    with running(store) as first, running(other) as second:
        assert first.registry is not second.registry
        first_hosts = {s.labels["Hostname"] for s in scrape(first)["DCGM_FI_DEV_GPU_TEMP"].samples}
        second_hosts = {
            s.labels["Hostname"] for s in scrape(second)["DCGM_FI_DEV_GPU_TEMP"].samples
        }
    assert first_hosts == {NODE, OTHER}
    assert second_hosts == {"gpu-b1"}
    assert all(not m.name.startswith("DCGM_") for m in REGISTRY.collect())


# ---- faults --------------------------------------------------------------------------------


def test_xid_48_sets_the_last_xid_gauge_of_that_gpu(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    inject(store, "xid", NODE, NOW, code=48, gpu=3)
    xids = values(scrape(server)["DCGM_FI_DEV_XID_ERRORS"])
    assert xids.pop((NODE, 3)) == 48
    assert len(xids) == 15 and set(xids.values()) == {0.0}
    inject(store, "xid", NODE, NOW, code=13, gpu=3)
    assert gpu_values(server, "DCGM_FI_DEV_XID_ERRORS")[3] == 13  # the last one, not a count


def test_ecc_dbe_moves_the_ecc_counters_and_remapped_rows(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    inject(store, "ecc-dbe", NODE, NOW, gpu=5)
    inject(store, "ecc-dbe", NODE, NOW, gpu=5)
    families = scrape(server, NODE)
    expected = {
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2,
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 2,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 2,
        "DCGM_FI_DEV_XID_ERRORS": 48,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
    }
    for name, value in expected.items():
        got = {gpu: v for (_, gpu), v in values(families[name]).items()}
        assert got[5] == value, name
        assert all(v == 0 for gpu, v in got.items() if gpu != 5), name
    assert set(values(scrape(server, OTHER)["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]).values()) == {0.0}


def test_xid_64_is_a_row_remap_failure(store: ClusterState, server: DcgmExporterServer) -> None:
    inject(store, "xid", NODE, NOW, code=64, gpu=2)
    failures = gpu_values(server, "DCGM_FI_DEV_ROW_REMAP_FAILURE")
    assert failures[2] == 1
    assert sum(failures.values()) == 1


def test_nvlink_errors_count_up(store: ClusterState, server: DcgmExporterServer) -> None:
    inject(store, "nvlink", NODE, NOW, gpu=4, errors=250)
    families = scrape(server, NODE)
    flit = {gpu: v for (_, gpu), v in values(families[FLIT]).items()}
    replay = {gpu: v for (_, gpu), v in values(families[REPLAY]).items()}
    assert flit[4] == 250 and replay[4] == 25
    assert sum(flit.values()) == 250
    inject(store, "nvlink", NODE, NOW, gpu=4, errors=50)
    assert gpu_values(server, FLIT)[4] == 300  # a counter: only ever grows
    assert gpu_values(server, "DCGM_FI_DEV_XID_ERRORS")[4] == 0


def test_gpu_that_fell_off_the_bus_keeps_only_its_xid_series(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    """DCGM cannot read a lost GPU, so its device fields vanish; the driver's Xid events are
    still recorded, so the gauge keeps saying 79 and the exporter's count counts it."""
    inject(store, "xid", NODE, NOW, code=79, gpu=6)
    for families in (scrape(server, NODE), scrape(server)):
        for name, family in families.items():
            if name == COUNT:
                continue
            gpus = {gpu for (host, gpu) in values(family) if host == NODE}
            expected = set(range(8)) if name == XID_GAUGE else set(range(8)) - {6}
            assert gpus == expected, name
        assert values(families[XID_GAUGE])[(NODE, 6)] == 79
        counts = xid_counts(families)
        assert counts[6] == {"79": 1}
        assert all(counts[gpu] == {"": 0} for gpu in range(8) if gpu != 6)
    assert set(values(scrape(server)[XID_GAUGE], Hostname=OTHER).values()) == {0.0}
    # The gauge and the count of the lost GPU carry the same labels but `xid` and the window,
    # so the GPUXidError rule's `or` makes one alert of the two.
    families = scrape(server, NODE)
    (gauge,) = [s for s in families[XID_GAUGE].samples if s.labels["gpu"] == "6"]
    (count,) = [s for s in families[COUNT].samples if s.labels["gpu"] == "6"]
    assert count.labels == {**gauge.labels, **WINDOW, "xid": "79"}
    assert set(gauge.labels) == LABELS
    # A reboot brings it back with a clean Xid gauge and an empty window (DCGM restarted).
    inject(store, "reboot", NODE, NOW)
    families = scrape(server, NODE)
    assert gpu_values(server, XID_GAUGE) == dict.fromkeys(range(8), 0.0)
    assert xid_counts(families) == {gpu: {"": 0} for gpu in range(8)}
    assert {gpu for (_, gpu) in values(families["DCGM_FI_DEV_GPU_TEMP"])} == set(range(8))


# ---- the exporter's Xid count ----------------------------------------------------------------


def test_xid_count_is_zero_without_xids(server: DcgmExporterServer) -> None:
    families = scrape(server)
    for node in (NODE, OTHER):
        assert xid_counts(families, node) == {gpu: {"": 0} for gpu in range(8)}
    _, _, text = fetch(server.node_url(NODE))
    lines = [line for line in text.splitlines() if line.startswith(COUNT + "{")]
    assert len(lines) == 8
    assert all('window_size_in_ms="300000"' in line and "xid=" not in line for line in lines)
    assert all(line.endswith("} 0.0") for line in lines)


def test_xid_count_counts_each_code_within_the_window(store: ClusterState) -> None:
    clock = FakeClock(EXPORTER_START)
    with running(store, xid_window_ms=60_000, clock=clock.time) as server:
        assert xid_counts(scrape(server, NODE))[2] == {"": 0}
        inject(store, "xid", NODE, NOW, code=13, gpu=2)
        assert xid_counts(scrape(server, NODE))[2] == {"13": 1}
        clock.advance(1)
        assert xid_counts(scrape(server))[2] == {"13": 1}  # seen again: not a new Xid
        inject(store, "xid", NODE, NOW, code=31, gpu=2)
        clock.advance(10)
        assert xid_counts(scrape(server, NODE))[2] == {"13": 1, "31": 1}
        inject(store, "xid", NODE, NOW, code=13, gpu=2)
        clock.advance(10)
        families = scrape(server, NODE)
        assert xid_counts(families)[2] == {"13": 2, "31": 1}
        assert gpu_values(server, XID_GAUGE)[2] == 13  # the gauge: the last one only
        samples = [s for s in families[COUNT].samples if s.labels["gpu"] == "2"]
        assert {s.labels["window_size_in_ms"] for s in samples} == {"60000"}
        # The window slides: the first 13 (at t=0) leaves it after 60 s, the rest later.
        clock.now = EXPORTER_START + timedelta(seconds=60.5)
        assert xid_counts(scrape(server, NODE))[2] == {"13": 1, "31": 1}
        clock.advance(60)
        assert xid_counts(scrape(server, NODE))[2] == {"": 0}
        assert gpu_values(server, XID_GAUGE)[2] == 13  # the gauge does not forget
        assert all(c == {"": 0} for gpu, c in xid_counts(scrape(server, NODE)).items() if gpu != 2)


def test_xid_count_of_ecc_double_bit_errors(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    inject(store, "ecc-dbe", NODE, NOW, gpu=5)
    families = scrape(server, NODE)
    assert xid_counts(families)[5] == {"48": 1}
    assert xid_counts(scrape(server, OTHER), OTHER)[5] == {"": 0}


def test_xid_count_starts_over_after_a_reboot(store: ClusterState) -> None:
    clock = FakeClock(EXPORTER_START)
    with running(store, clock=clock.time) as server:
        inject(store, "xid", NODE, NOW, code=13, gpu=0)
        assert xid_counts(scrape(server, NODE))[0] == {"13": 1}
        inject(store, "reboot", NODE, NOW)
        clock.advance(1)
        assert xid_counts(scrape(server, NODE))[0] == {"": 0}
        inject(store, "xid", NODE, NOW, code=13, gpu=0)
        clock.advance(1)
        assert xid_counts(scrape(server, NODE))[0] == {"13": 1}


def test_xid_count_only_of_nodes_whose_exporter_is_up(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    inject(store, "not-ready", NODE, NOW)
    hosts = {s.labels["Hostname"] for s in scrape(server)[COUNT].samples}
    assert hosts == {OTHER}


def test_fabric_manager_down_is_not_started(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    inject(store, "fabric-manager-down", NODE, NOW)
    assert set(gpu_values(server, "DCGM_FI_DEV_FABRIC_MANAGER_STATUS").values()) == {1.0}
    assert set(gpu_values(server, "DCGM_FI_DEV_FABRIC_MANAGER_STATUS", OTHER).values()) == {3.0}


def test_exporter_down_when_its_pod_is_not_ready(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    inject(store, "not-ready", NODE, NOW)
    status, _, text = fetch(server.node_url(NODE))
    assert status == 503 and "nvidia-dcgm-exporter" in text
    hosts = {s.labels["Hostname"] for s in scrape(server)["DCGM_FI_DEV_XID_ERRORS"].samples}
    assert hosts == {OTHER}


# ---- temperature overrides -----------------------------------------------------------------


def test_set_temperature_overrides_one_gpu_until_cleared(
    store: ClusterState, server: DcgmExporterServer
) -> None:
    baseline = gpu_values(server, "DCGM_FI_DEV_GPU_TEMP")
    memory = gpu_values(server, "DCGM_FI_DEV_MEMORY_TEMP")
    set_temperature(store, NODE, 7, 91.5)
    hot = gpu_values(server, "DCGM_FI_DEV_GPU_TEMP")
    assert hot == {**baseline, 7: 91.5}
    assert gpu_values(server, "DCGM_FI_DEV_MEMORY_TEMP") == memory
    assert gpu_values(server, "DCGM_FI_DEV_GPU_TEMP", OTHER)[7] != 91.5
    set_temperature(store, NODE, 7, None)
    assert gpu_values(server, "DCGM_FI_DEV_GPU_TEMP") == baseline


def test_set_temperature_is_per_store(store: ClusterState) -> None:
    other = ClusterState()
    other.load(healthy_cluster(2, NOW)["items"])
    set_temperature(store, NODE, 0, 99)
    with running(other) as server:
        assert gpu_values(server, "DCGM_FI_DEV_GPU_TEMP")[0] != 99


@pytest.mark.parametrize(
    ("node", "gpu", "message"),
    [
        ("nope", 0, "not found"),
        ("cpu-1", 0, "no NVIDIA GPUs"),
        (NODE, 8, "0 to 7"),
        (NODE, -1, "0 to 7"),
    ],
)
def test_set_temperature_rejects_unknown_targets(
    store: ClusterState, node: str, gpu: int, message: str
) -> None:
    with pytest.raises(FaultError, match=message):
        set_temperature(store, node, gpu, 90)


# ---- model names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("product", "name"),
    [
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA-H100-80GB-HBM3-SHARED", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA A100-SXM4-40GB"),
        ("NVIDIA-B200", "NVIDIA B200"),
        ("", ""),
    ],
)
def test_model_name_from_gfd_product(product: str, name: str) -> None:
    assert model_name(product) == name
